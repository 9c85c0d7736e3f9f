package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// server is the package's PostgreSQL server; each test takes a fresh
// database on it.
var server *devpostgres.Server

func TestMain(m *testing.M) { os.Exit(devpostgres.RunTests(m, &server)) }

func openDSN(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openFresh(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := server.NewDatabase(t)
	return openDSN(t, dsn), dsn
}

func TestContract(t *testing.T) {
	contenttest.Run(t, func(t *testing.T) content.Store {
		s, _ := openFresh(t)
		return s
	})
}

// appliedMigrations reads schema_migrations: version to applied_at.
func appliedMigrations(t *testing.T, q querier) map[int]time.Time {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT version, applied_at FROM schema_migrations`)
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	m := map[int]time.Time{}
	for rows.Next() {
		var (
			v  int
			at time.Time
		)
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatalf("scan schema_migrations: %v", err)
		}
		if _, dup := m[v]; dup {
			t.Errorf("migration %d recorded twice", v)
		}
		m[v] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return m
}

// TestConcurrentMigrations opens one empty database from several
// goroutines, each with its own pool, as replicas starting together
// would: every Open succeeds and each migration is recorded once.
func TestConcurrentMigrations(t *testing.T) {
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	if t.Failed() {
		return
	}
	got := appliedMigrations(t, stores[0].pool)
	if len(got) != len(migrations()) {
		t.Errorf("schema_migrations = %v, want one row for each of %d migrations", got, len(migrations()))
	}
	for _, m := range migrations() {
		if _, ok := got[m.version]; !ok {
			t.Errorf("migration %d not recorded", m.version)
		}
	}
	for i, s := range stores {
		if v, err := s.SchemaVersion(ctx); err != nil || v != latestVersion() {
			t.Errorf("store %d: SchemaVersion = %d, %v; want %d", i, v, err, latestVersion())
		}
	}
	// Every store sees writes made through the others.
	if err := stores[1].CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	for i, s := range stores {
		if _, err := s.Organization(ctx, "org"); err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
}

func TestSchemaVersion(t *testing.T) {
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if v, err := schemaVersion(ctx, pool); err != nil || v != 0 {
		t.Fatalf("schema version of an empty database = %d, %v; want 0", v, err)
	}

	s := openDSN(t, dsn)
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestVersion() {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, latestVersion())
	}
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before := appliedMigrations(t, pool)
	s.Close()

	// Reopening keeps the data and applies nothing again.
	s = openDSN(t, dsn)
	if _, err := s.Organization(ctx, "org"); err != nil {
		t.Errorf("Organization after reopen: %v", err)
	}
	after := appliedMigrations(t, pool)
	for v, at := range before {
		if !after[v].Equal(at) {
			t.Errorf("migration %d applied_at changed from %s to %s", v, at, after[v])
		}
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestVersion() {
		t.Errorf("SchemaVersion after reopen = %d, %v", v, err)
	}

	// A schema newer than the code is refused, not downgraded.
	if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')`, latestVersion()+1); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, dsn); err == nil {
		s2.Close()
		t.Error("Open succeeded on a database with a newer schema")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open error = %v, want it to say the schema is newer", err)
	}
}

// TestConnectionSettings checks the timeouts every pooled connection gets
// and that the DSN overrides them and the pool size.
func TestConnectionSettings(t *testing.T) {
	dsn := server.NewDatabase(t)
	tests := []struct {
		name         string
		params       string
		statement    string
		lock         string
		maxConns     int32
		cancelsAfter time.Duration // 0: no query is run against the limit
	}{
		{name: "defaults", params: "", statement: "5s", lock: "3s"},
		{name: "parameters", params: "&statement_timeout=200ms&lock_timeout=100ms&pool_max_conns=2",
			statement: "200ms", lock: "100ms", maxConns: 2, cancelsAfter: 200 * time.Millisecond},
		{name: "options", params: "&options=-c%20statement_timeout%3D300ms",
			statement: "300ms", lock: "3s", cancelsAfter: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := openDSN(t, dsn+tt.params)
			if tt.maxConns != 0 && s.pool.Config().MaxConns != tt.maxConns {
				t.Errorf("MaxConns = %d, want %d", s.pool.Config().MaxConns, tt.maxConns)
			}
			// Hold every connection the pool may open at once, so the
			// check covers more than the first.
			n := int(s.pool.Config().MaxConns)
			conns := make([]*pgxpool.Conn, n)
			for i := range conns {
				c, err := s.pool.Acquire(ctx)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				defer c.Release()
				conns[i] = c
			}
			for i, c := range conns {
				var statement, lock string
				if err := c.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&statement, &lock); err != nil {
					t.Fatal(err)
				}
				if statement != tt.statement || lock != tt.lock {
					t.Errorf("conn %d: statement_timeout %q, lock_timeout %q; want %q, %q", i, statement, lock, tt.statement, tt.lock)
				}
			}
			if tt.cancelsAfter == 0 {
				return
			}
			start := time.Now()
			_, err := conns[0].Exec(ctx, `SELECT pg_sleep(10)`)
			if code := pgErrorCode(err); code != "57014" { // query_canceled
				t.Errorf("pg_sleep(10) = %v, want it cancelled by statement_timeout", err)
			}
			if took := time.Since(start); took < tt.cancelsAfter || took > 5*time.Second {
				t.Errorf("pg_sleep(10) ended after %s, want about %s", took, tt.cancelsAfter)
			}
		})
	}
}

// TestStoppedServer uses a server of its own: Ping names the database when
// the server is gone, and the pool and WatchRevisions recover once it is
// back.
func TestStoppedServer(t *testing.T) {
	ctx := t.Context()
	srv := devpostgres.StartForTest(t)
	s := openDSN(t, srv.DSN(srv.Database()))
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w := watch(t, s)
	w.ready(t)

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	err := s.Ping(ctx)
	wantName := fmt.Sprintf("ping content database 127.0.0.1:%d/%s: ", srv.Port(), srv.Database())
	if err == nil || !strings.Contains(err.Error(), wantName) || errors.Unwrap(err) == nil {
		t.Fatalf("Ping with the server stopped = %v, want a wrapped error starting %q", err, wantName)
	}

	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Pooled connections to the old server fail once each before the pool
	// replaces them.
	deadline := time.Now().Add(10 * time.Second)
	for err := s.Ping(ctx); err != nil; err = s.Ping(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("Ping after restart: %v", err)
		}
	}
	// The watcher reconnects, says so, and passes notifications on again;
	// it told why the connection it had ended.
	w.ready(t)
	select {
	case err := <-w.failed:
		if !strings.Contains(err.Error(), "watch revisions") {
			t.Errorf("reported %v, want an error saying what failed", err)
		}
	default:
		t.Error("the lost connection was not reported")
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "app")
}

// watcher collects what WatchRevisions reports.
type watcher struct {
	ch     chan string
	done   chan error
	failed chan error // why connections ended
}

// watch runs s.WatchRevisions until the test ends.
func watch(t *testing.T, s *Store) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{ch: make(chan string, 1000), done: make(chan error, 1), failed: make(chan error, 100)}
	report := func(err error) {
		select {
		case w.failed <- err:
		default:
		}
	}
	go func() { w.done <- s.WatchRevisions(ctx, func(id string) { w.ch <- id }, report) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("WatchRevisions returned %v after its context ended, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("WatchRevisions did not return after its context ended")
		}
	})
	return w
}

// ready waits for the empty ID that says the watcher listens.
func (w *watcher) ready(t *testing.T) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case id := <-w.ch:
			if id == "" {
				return
			}
		case <-timeout:
			t.Fatal("WatchRevisions not listening after 15s")
		}
	}
}

// expect waits up to a second for the next notification, which must name
// app.
func (w *watcher) expect(t *testing.T, app string) {
	t.Helper()
	select {
	case id := <-w.ch:
		if id != app {
			t.Errorf("notified of %q, want %q", id, app)
		}
	case <-time.After(5 * time.Second): // the replicas test holds the 1 s goal
		t.Errorf("no notification for %q within 5s", app)
	}
}

// decode reads JSON as the bundle package does: numbers as json.Number,
// kept as written.
func decode(t *testing.T, doc string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return v
}

func mustRecord(t *testing.T, kind content.Kind, doc string) content.Record {
	t.Helper()
	r, problems := content.ParseRecord(kind, decode(t, doc), "", "")
	if len(problems) > 0 {
		t.Fatalf("%s: %v", doc, problems)
	}
	return r
}

func mustApp(t *testing.T, doc string) tenancy.App {
	t.Helper()
	a, problems := content.ParseApp(decode(t, doc), "")
	if len(problems) > 0 {
		t.Fatalf("%s: %v", doc, problems)
	}
	return a
}

// TestWatchRevisions writes through one store and watches through another
// on the same database, as two replicas would.
func TestWatchRevisions(t *testing.T) {
	ctx := t.Context()
	writer, dsn := openFresh(t)
	reader := openDSN(t, dsn)
	w := watch(t, reader)
	w.ready(t)

	bundle := func(handler string) *content.Bundle {
		return &content.Bundle{
			Organizations: []tenancy.Organization{{ID: "org", Name: "Org"}},
			Apps: []tenancy.App{
				mustApp(t, `{"appId":"app-a","organizationId":"org","name":"A"}`),
				mustApp(t, `{"appId":"app-b","organizationId":"org","name":"B"}`),
			},
			Records: []content.Record{mustRecord(t, content.KindHandler, `{"appId":"app-a","intentId":"Hi","data":{"x":`+handler+`}}`)},
		}
	}
	if _, err := writer.Import(ctx, bundle("1"), nil); err != nil {
		t.Fatal(err)
	}
	// One notification per app, in ID order, from the import's commit.
	w.expect(t, "app-a")
	w.expect(t, "app-b")

	intent := mustRecord(t, content.KindIntent, `{"appId":"app-b","intentId":"New"}`)
	steps := []struct {
		name string
		// write changes nothing when want is empty; the step then writes
		// to app-b as a marker, and the next notification must be the
		// marker's, since notifications arrive in commit order.
		write func(context.Context) error
		want  string
	}{
		{"create record", func(ctx context.Context) error { _, err := writer.CreateRecord(ctx, intent); return err }, "app-b"},
		{"update record", func(ctx context.Context) error {
			_, err := writer.UpdateRecord(ctx, "app-b", content.KindIntent, "New", func(r content.Record) (content.Record, error) {
				r.Doc = []byte(`{"intentId":"New","name":"n"}`)
				return r, nil
			})
			return err
		}, "app-b"},
		{"delete record", func(ctx context.Context) error {
			_, err := writer.DeleteRecord(ctx, "app-b", content.KindIntent, "New")
			return err
		}, "app-b"},
		{"import changing a record", func(ctx context.Context) error { _, err := writer.Import(ctx, bundle("2"), nil); return err }, "app-a"},
		{"create app", func(ctx context.Context) error {
			return writer.CreateApp(ctx, tenancy.App{ID: "app-c", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()})
		}, "app-c"},
		{"import changing nothing", func(ctx context.Context) error { _, err := writer.Import(ctx, bundle("2"), nil); return err }, ""},
		{"refused update", func(ctx context.Context) error {
			_, err := writer.UpdateRecord(ctx, "app-a", content.KindHandler, "Hi", func(r content.Record) (content.Record, error) {
				return r, errors.New("refused")
			})
			if err == nil {
				return errors.New("refused update succeeded")
			}
			return nil
		}, ""},
		{"failed create", func(ctx context.Context) error {
			if _, err := writer.CreateRecord(ctx, intent); err != nil {
				return err
			}
			_, err := writer.CreateRecord(ctx, intent)
			if err == nil {
				return errors.New("second create succeeded, want a conflict")
			}
			if !errors.Is(err, content.ErrConflict) {
				return fmt.Errorf("second create: %w; want a conflict", err)
			}
			return nil
		}, "app-b"}, // the first create only
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.write(ctx); err != nil {
				t.Fatal(err)
			}
			if st.want != "" {
				w.expect(t, st.want)
				return
			}
			marker := tenancy.App{ID: "marker-" + strings.ReplaceAll(st.name, " ", "-"), OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}
			if err := writer.CreateApp(ctx, marker); err != nil {
				t.Fatal(err)
			}
			w.expect(t, marker.ID)
		})
	}
	// The failed create of the last step sent nothing after its first.
	marker := tenancy.App{ID: "marker-end", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := writer.CreateApp(ctx, marker); err != nil {
		t.Fatal(err)
	}
	w.expect(t, marker.ID)
}

func TestWatchRevisionsEndsWhenStoreCloses(t *testing.T) {
	s, _ := openFresh(t)
	done := make(chan error, 1)
	go func() { done <- s.WatchRevisions(context.Background(), func(string) {}, nil) }()
	s.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchRevisions = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchRevisions still running 5s after Close")
	}
}

// TestTimesStoredSplit: the contract suite checks times round trip to the
// nanosecond; here, how: microseconds as a timestamp, the rest apart.
func TestTimesStoredSplit(t *testing.T) {
	s, _ := openFresh(t)
	ctx := t.Context()
	created := time.Date(2025, 6, 1, 20, 0, 0, 123456789, time.FixedZone("UTC-7", -7*60*60))
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	// The database holds the microseconds as a timestamp, the rest apart.
	var at time.Time
	var ns int16
	if err := s.pool.QueryRow(ctx, `SELECT created_at, created_at_ns FROM organizations WHERE id = 'org'`).Scan(&at, &ns); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 6, 2, 3, 0, 0, 123456000, time.UTC); !at.Equal(want) || ns != 789 {
		t.Errorf("stored created_at = %v + %d ns, want %v + 789 ns", at, ns, want)
	}
}

// TestDocumentsReadBackAsWritten: jsonb reorders keys and adds spaces; the
// store gives back the canonical bytes the content package wrote. Only
// numbers in exponent notation come back otherwise: written out, as
// PostgreSQL's numeric prints them.
func TestDocumentsReadBackAsWritten(t *testing.T) {
	s, _ := openFresh(t)
	ctx := t.Context()
	if _, err := s.Import(ctx, &content.Bundle{
		Organizations: []tenancy.Organization{{ID: "org", Name: "Org"}},
		Apps:          []tenancy.App{mustApp(t, `{"appId":"app","organizationId":"org","name":"A"}`)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		// want is the document read back; empty means as written.
		want string
	}{
		{"keys of every length, nested", `{"appId":"app","intentId":"a","longer key":{"bb":null,"a":true},"k":[{"z":1,"y":[]}]}`, ""},
		{"numbers keep their digits", `{"appId":"app","intentId":"b","n":[1,2.50,-0.001,0,12345678901234567890.123]}`, ""},
		{"escapes and HTML characters", `{"appId":"app","intentId":"c","s":"<tag> & \"quote\" \\ \n\t\u0001 \u00e9 \u2028"}`, ""},
		{"exponents are written out", `{"appId":"app","intentId":"d","n":[1e3,2.5E-2]}`, `{"intentId":"d","n":[1000,0.025]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRecord(t, content.KindIntent, tt.doc)
			want := tt.want
			if want == "" {
				want = string(r.Doc)
			}
			if _, err := s.CreateRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
			got, err := s.Record(ctx, "app", content.KindIntent, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Doc) != want {
				t.Errorf("doc\n got %s\nwant %s", got.Doc, want)
			}
		})
	}
	// An app's document too, and one without other fields reads back with
	// no document, as from SQLite.
	a := mustApp(t, `{"appId":"app2","organizationId":"org","name":"B","zz":1,"channels":[{"id":"web","key":"k"}],"a <b> & c":"x"}`)
	if _, err := s.Import(ctx, &content.Bundle{Apps: []tenancy.App{a}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.App(ctx, "app2"); err != nil || string(got.Doc) != string(a.Doc) {
		t.Errorf("App(app2) doc = %s, %v; want %s", got.Doc, err, a.Doc)
	}
	if bare, err := s.App(ctx, "app"); err != nil || bare.Doc != nil {
		t.Errorf("App(app) doc = %s, %v; want none", bare.Doc, err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name, dsn, want string
	}{
		{"unparsable", "postgres://u:s3cret@127.0.0.1:notaport/x", "open content database: cannot parse the DSN: invalid port"},
		{"bad pool setting", server.DSN("x") + "&pool_max_conns=many", "cannot parse pool_max_conns"},
		{"missing database", server.DSN("no_such_database"), fmt.Sprintf("open content database 127.0.0.1:%d/no_such_database: connect: ", server.Port())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.dsn)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open = %v, want it to contain %q and no password", err, tt.want)
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	s, _ := openFresh(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded")
	}
}

// TestImportAndWritesDoNotDeadlock races imports that rewrite an app's
// records against single-record updates of the same records: both lock
// the app before its records, so none fails with a deadlock.
func TestImportAndWritesDoNotDeadlock(t *testing.T) {
	s, _ := openFresh(t)
	ctx := t.Context()
	bundle := func(v int) *content.Bundle {
		b := &content.Bundle{
			Organizations: []tenancy.Organization{{ID: "org", Name: "Org"}},
			Apps: []tenancy.App{
				mustApp(t, `{"appId":"app-a","organizationId":"org","name":"A"}`),
				mustApp(t, `{"appId":"app-b","organizationId":"org","name":"B"}`),
			},
		}
		for _, app := range []string{"app-b", "app-a"} {
			for i := range 5 {
				b.Records = append(b.Records, mustRecord(t, content.KindIntent, fmt.Sprintf(`{"appId":%q,"intentId":"i%d","name":"v%d"}`, app, i, v)))
			}
		}
		return b
	}
	if _, err := s.Import(ctx, bundle(0), nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 10 {
				if _, err := s.Import(ctx, bundle(w*100+i+1), nil); err != nil {
					t.Errorf("Import: %v", err)
					return
				}
			}
		})
	}
	for w := range 3 {
		wg.Go(func() {
			for i := range 20 {
				app := []string{"app-a", "app-b"}[i%2]
				id := fmt.Sprintf("i%d", (w+i)%5)
				if _, err := s.UpdateRecord(ctx, app, content.KindIntent, id, func(r content.Record) (content.Record, error) {
					r.Doc = []byte(fmt.Sprintf(`{"intentId":%q,"name":"w%d-%d"}`, id, w, i))
					return r, nil
				}); err != nil {
					t.Errorf("UpdateRecord: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestWritesFailWhenTheDatabaseCannotBeReached: an error that is not the
// server's (here a cancelled context) is reported, never taken as success.
func TestWritesFailWhenTheDatabaseCannotBeReached(t *testing.T) {
	s, _ := openFresh(t)
	if _, err := s.Import(t.Context(), &content.Bundle{
		Organizations: []tenancy.Organization{{ID: "org", Name: "Org"}},
		Apps:          []tenancy.App{mustApp(t, `{"appId":"app","organizationId":"org","name":"A"}`)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		op   func(context.Context) error
	}{
		{"CreateOrganization", func(ctx context.Context) error {
			return s.CreateOrganization(ctx, tenancy.Organization{ID: "org2", CreatedAt: time.Now()})
		}},
		{"CreateApp", func(ctx context.Context) error {
			return s.CreateApp(ctx, tenancy.App{ID: "app2", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()})
		}},
		{"CreateToken", func(ctx context.Context) error {
			return s.CreateToken(ctx, tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok", Hash: []byte{1}, OrganizationID: "org", CreatedAt: time.Now()})
		}},
		{"RevokeToken", func(ctx context.Context) error { return s.RevokeToken(ctx, "tok", time.Now()) }},
		{"CreateRecord", func(ctx context.Context) error {
			_, err := s.CreateRecord(ctx, mustRecord(t, content.KindIntent, `{"appId":"app","intentId":"i"}`))
			return err
		}},
		{"Import", func(ctx context.Context) error {
			_, err := s.Import(ctx, &content.Bundle{Apps: []tenancy.App{mustApp(t, `{"appId":"app3","organizationId":"org","name":"C"}`)}}, nil)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("with a cancelled context: %v, want %v", err, context.Canceled)
			}
		})
	}
	// Nothing was written.
	if apps, err := s.ListApps(t.Context(), ""); err != nil || len(apps) != 1 {
		t.Errorf("ListApps = %d apps, %v; want only the first", len(apps), err)
	}
}
