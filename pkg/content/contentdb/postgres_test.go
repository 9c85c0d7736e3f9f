package contentdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/revisionwatch"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// openFresh opens a new PostgreSQL database and returns the store and its
// DSN.
func openFresh(t *testing.T) (*DB, string) {
	t.Helper()
	dsn := server.NewDatabase(t)
	return openDB(t, dsn), dsn
}

// openWatching opens dsn with Open, whose store must watch revisions.
func openWatching(t *testing.T, dsn string) (Store, revisionwatch.Source) {
	t.Helper()
	s := openStore(t, dsn)
	w, ok := s.(revisionwatch.Source)
	if !ok {
		t.Fatalf("the store Open returns for PostgreSQL (%T) has no WatchRevisions", s)
	}
	return s, w
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

// TestPostgresWatchRevisions writes through one store and watches through
// another on the same database, as two replicas would.
func TestPostgresWatchRevisions(t *testing.T) {
	ctx := t.Context()
	writer, dsn := openFresh(t)
	_, reader := openWatching(t, dsn)
	w := revisionwatch.Start(t, reader)
	w.Ready(t)

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
	if _, err := writer.Import(contenttest.Acting(ctx), bundle("1"), nil); err != nil {
		t.Fatal(err)
	}
	// One notification per app, in ID order, from the import's commit.
	w.Expect(t, "app-a")
	w.Expect(t, "app-b")

	intent := mustRecord(t, content.KindIntent, `{"appId":"app-b","intentId":"New"}`)
	steps := []struct {
		name string
		// write changes nothing when want is empty; the step then writes
		// to app-b as a marker, and the next notification must be the
		// marker's, since notifications arrive in commit order.
		write func(context.Context) error
		want  string
	}{
		{"create record", func(ctx context.Context) error {
			_, err := writer.CreateRecord(contenttest.Acting(ctx), intent)
			return err
		}, "app-b"},
		{"update record", func(ctx context.Context) error {
			_, err := writer.UpdateRecord(contenttest.Acting(ctx), "app-b", content.KindIntent, "New", 0, func(r content.Record) (content.Record, error) {
				r.Doc = []byte(`{"intentId":"New","name":"n"}`)
				return r, nil
			})
			return err
		}, "app-b"},
		{"delete record", func(ctx context.Context) error {
			_, err := writer.DeleteRecord(contenttest.Acting(ctx), "app-b", content.KindIntent, "New", 0)
			return err
		}, "app-b"},
		{"import changing a record", func(ctx context.Context) error {
			_, err := writer.Import(contenttest.Acting(ctx), bundle("2"), nil)
			return err
		}, "app-a"},
		{"create app", func(ctx context.Context) error {
			return writer.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app-c", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()})
		}, "app-c"},
		{"import changing nothing", func(ctx context.Context) error {
			_, err := writer.Import(contenttest.Acting(ctx), bundle("2"), nil)
			return err
		}, ""},
		{"refused update", func(ctx context.Context) error {
			_, err := writer.UpdateRecord(contenttest.Acting(ctx), "app-a", content.KindHandler, "Hi", 0, func(r content.Record) (content.Record, error) {
				return r, errors.New("refused")
			})
			if err == nil {
				return errors.New("refused update succeeded")
			}
			return nil
		}, ""},
		{"failed create", func(ctx context.Context) error {
			if _, err := writer.CreateRecord(contenttest.Acting(ctx), intent); err != nil {
				return err
			}
			_, err := writer.CreateRecord(contenttest.Acting(ctx), intent)
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
				w.Expect(t, st.want)
				return
			}
			marker := tenancy.App{ID: "marker-" + strings.ReplaceAll(st.name, " ", "-"), OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}
			if err := writer.CreateApp(contenttest.Acting(ctx), marker); err != nil {
				t.Fatal(err)
			}
			w.Expect(t, marker.ID)
		})
	}
	// The failed create of the last step sent nothing after its first.
	marker := tenancy.App{ID: "marker-end", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := writer.CreateApp(contenttest.Acting(ctx), marker); err != nil {
		t.Fatal(err)
	}
	w.Expect(t, marker.ID)
}

func TestPostgresWatchRevisionsEndsWhenStoreCloses(t *testing.T) {
	s, w := openWatching(t, server.NewDatabase(t))
	done := make(chan error, 1)
	go func() { done <- w.WatchRevisions(context.Background(), func(string) {}, nil) }()
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

// TestPostgresTimesStoredSplit: the contract suite checks times round trip
// to the nanosecond; here, how: microseconds as a timestamp, the rest
// apart.
func TestPostgresTimesStoredSplit(t *testing.T) {
	s, _ := openFresh(t)
	ctx := t.Context()
	created := time.Date(2025, 6, 1, 20, 0, 0, 123456789, time.FixedZone("UTC-7", -7*60*60))
	if err := s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	// The database holds the microseconds as a timestamp, the rest apart.
	var at time.Time
	var ns int16
	if err := s.SQL().SQL().QueryRowContext(ctx, `SELECT created_at, created_at_ns FROM organizations WHERE id = 'org'`).Scan(&at, &ns); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 6, 2, 3, 0, 0, 123456000, time.UTC); !at.Equal(want) || ns != 789 {
		t.Errorf("stored created_at = %v + %d ns, want %v + 789 ns", at, ns, want)
	}
}

// TestPostgresDocumentsReadBackAsWritten: jsonb reorders keys and adds
// spaces; the store gives back the canonical bytes the content package
// wrote. Only numbers in exponent notation come back otherwise: written
// out, as PostgreSQL's numeric prints them.
func TestPostgresDocumentsReadBackAsWritten(t *testing.T) {
	s, _ := openFresh(t)
	ctx := t.Context()
	if _, err := s.Import(contenttest.Acting(ctx), &content.Bundle{
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
			if _, err := s.CreateRecord(contenttest.Acting(ctx), r); err != nil {
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
	if _, err := s.Import(contenttest.Acting(ctx), &content.Bundle{Apps: []tenancy.App{a}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.App(ctx, "app2"); err != nil || string(got.Doc) != string(a.Doc) {
		t.Errorf("App(app2) doc = %s, %v; want %s", got.Doc, err, a.Doc)
	}
	if bare, err := s.App(ctx, "app"); err != nil || bare.Doc != nil {
		t.Errorf("App(app) doc = %s, %v; want none", bare.Doc, err)
	}
}

// TestPostgresImportAndWritesDoNotDeadlock races imports that rewrite an
// app's records against single-record updates of the same records: both
// lock the app before its records, so none fails with a deadlock.
func TestPostgresImportAndWritesDoNotDeadlock(t *testing.T) {
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
	if _, err := s.Import(contenttest.Acting(ctx), bundle(0), nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 10 {
				if _, err := s.Import(contenttest.Acting(ctx), bundle(w*100+i+1), nil); err != nil {
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
				if _, err := s.UpdateRecord(contenttest.Acting(ctx), app, content.KindIntent, id, 0, func(r content.Record) (content.Record, error) {
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

// TestPostgresWritesFailWhenTheDatabaseCannotBeReached: an error that is
// not the server's (here a cancelled context) is reported, never taken as
// success.
func TestPostgresWritesFailWhenTheDatabaseCannotBeReached(t *testing.T) {
	s, _ := openFresh(t)
	if _, err := s.Import(contenttest.Acting(t.Context()), &content.Bundle{
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
			return s.CreateOrganization(contenttest.Acting(ctx), tenancy.Organization{ID: "org2", CreatedAt: time.Now()})
		}},
		{"CreateApp", func(ctx context.Context) error {
			return s.CreateApp(contenttest.Acting(ctx), tenancy.App{ID: "app2", OrganizationID: "org", CreatedAt: time.Now(), UpdatedAt: time.Now()})
		}},
		{"CreateToken", func(ctx context.Context) error {
			return s.CreateToken(contenttest.Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok", Hash: []byte{1}, OrganizationID: "org", CreatedAt: time.Now()})
		}},
		{"RevokeToken", func(ctx context.Context) error { return s.RevokeToken(contenttest.Acting(ctx), "tok", time.Now()) }},
		{"CreateRecord", func(ctx context.Context) error {
			_, err := s.CreateRecord(contenttest.Acting(ctx), mustRecord(t, content.KindIntent, `{"appId":"app","intentId":"i"}`))
			return err
		}},
		{"Import", func(ctx context.Context) error {
			_, err := s.Import(contenttest.Acting(ctx), &content.Bundle{Apps: []tenancy.App{mustApp(t, `{"appId":"app3","organizationId":"org","name":"C"}`)}}, nil)
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

// TestPostgresVectorsInEveryQueryMode saves, loads and prunes vectors in
// each of pgx's query modes, which a DSN may choose (simple_protocol
// behind a transaction-mode pooler): the byte arrays go as bytea[] in all
// of them.
func TestPostgresVectorsInEveryQueryMode(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			s := openDB(t, server.NewDatabase(t)+"&default_query_exec_mode="+mode)
			withApp(t, s)
			want, keys := numberedVectors(1200, 8) // more than one chunk
			if err := s.SaveVectors(ctx, "app", "m", want); err != nil {
				t.Fatalf("SaveVectors: %v", err)
			}
			got, err := s.LoadVectors(ctx, "app", "m", append(keys, [32]byte{}))
			if err != nil {
				t.Fatalf("LoadVectors: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("loaded %d vectors, want %d", len(got), len(want))
			}
			for h, w := range want {
				for i := range w {
					if math.Float32bits(got[h][i]) != math.Float32bits(w[i]) {
						t.Fatalf("vector %x value %d = %v, want %v", h[:4], i, got[h][i], w[i])
					}
				}
			}
			n, err := s.PruneVectors(ctx, "app", "m", time.Now().Add(time.Second))
			if err != nil || n != len(want) {
				t.Errorf("PruneVectors = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}
