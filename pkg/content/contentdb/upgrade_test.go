package contentdb

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// engines are the engines of the upgrade tests, in the order they run.
var engines = []sqldb.Engine{sqldb.SQLite, sqldb.Postgres}

// TestTokensBeforeScopesKeepWhatTheyCouldDo builds a database as the
// release before token scopes left it, with a token in it, and opens it:
// the token keeps every scope it had in effect, and no more.
func TestTokensBeforeScopesKeepWhatTheyCouldDo(t *testing.T) {
	rows := map[sqldb.Engine][]string{
		sqldb.SQLite: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00Z')`,
			`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
			`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', x'01', 'org', 'app', 'web', '2026-01-01T00:00:00Z')`,
		},
		sqldb.Postgres: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
			`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', now(), now())`,
			`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', '\x01', 'org', 'app', 'web', now())`,
		},
	}
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			ctx := t.Context()
			dsn := databaseAt(t, e, 2, rows[e]...)

			s, err := OpenDB(ctx, dsn)
			if err != nil {
				t.Fatalf("open the database of the release before: %v", err)
			}
			defer s.Close()
			tok, err := s.Token(ctx, "old")
			if err != nil {
				t.Fatal(err)
			}
			if tok.Scopes != tenancy.LegacyScopes {
				t.Errorf("a token made before scopes has %s, want %s", tok.Scopes, tenancy.LegacyScopes)
			}
			if tok.Scopes.Has(tenancy.EventsRead) {
				t.Error("a token made before scopes may read events back, which it never could")
			}
		})
	}
}

// TestStoredVectorsUpgradeKeepsData builds a database as the release
// before stored vectors left it (migration 3), with an app, a record and a
// token in it, and opens it: migration 4 adds the vectors table, nothing
// else changes, and the app's vectors can be saved and loaded.
func TestStoredVectorsUpgradeKeepsData(t *testing.T) {
	rows := map[sqldb.Engine][]string{
		sqldb.SQLite: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00.000000000Z')`,
			`INSERT INTO apps (id, organization_id, name, created_at, updated_at, revision) VALUES ('app', 'org', 'App', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', 7)`,
			`INSERT INTO tokens (id, hash, organization_id, app_id, name, scopes, created_at) VALUES ('tok', x'01', 'org', 'app', 'web', 'content:read', '2026-01-01T00:00:00.000000000Z')`,
			`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'intent', 'Hours', '{"intentId":"Hours"}', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		},
		sqldb.Postgres: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
			`INSERT INTO apps (id, organization_id, name, created_at, updated_at, revision) VALUES ('app', 'org', 'App', now(), now(), 7)`,
			`INSERT INTO tokens (id, hash, organization_id, app_id, name, scopes, created_at) VALUES ('tok', '\x01', 'org', 'app', 'web', 'content:read', now())`,
			`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'intent', 'Hours', '{"intentId":"Hours"}', now(), now())`,
		},
	}
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			ctx := t.Context()
			dsn := databaseAt(t, e, 3, rows[e]...)

			s, err := OpenDB(ctx, dsn)
			if err != nil {
				t.Fatalf("open the database of the release before: %v", err)
			}
			defer s.Close()
			if v, err := s.SchemaVersion(ctx); err != nil || v != s.SQL().LatestVersion() {
				t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, s.SQL().LatestVersion())
			}
			if rev, err := s.Revision(ctx, "app"); err != nil || rev != 7 {
				t.Errorf("revision of the app = %d, %v; want 7 as before", rev, err)
			}
			if tok, err := s.Token(ctx, "tok"); err != nil || tok.Scopes != tenancy.ContentRead || tok.AppID != "app" {
				t.Errorf("token = %+v, %v; want it as before", tok, err)
			}
			if rec, err := s.Record(ctx, "app", content.KindIntent, "Hours"); err != nil || string(rec.Doc) != `{"intentId":"Hours"}` {
				t.Errorf("record = %s, %v; want it as before", rec.Doc, err)
			}
			h := [32]byte{1}
			if err := s.SaveVectors(ctx, "app", "m", map[[32]byte][]float32{h: {1, 2}}); err != nil {
				t.Fatalf("SaveVectors after the upgrade: %v", err)
			}
			if got, err := s.LoadVectors(ctx, "app", "m", [][32]byte{h}); err != nil || len(got[h]) != 2 {
				t.Errorf("LoadVectors after the upgrade = %v, %v", got, err)
			}
		})
	}
}

// The schema_migrations tables the releases made, as they made them.
const (
	sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`
	postgresMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`
)

// databaseAt makes a database of the engine as the release of migration
// version left it, with rows inserted, and returns its DSN: the path of a
// SQLite file, or a new database on the test server.
func databaseAt(t *testing.T, e sqldb.Engine, version int, rows ...string) string {
	t.Helper()
	if e == sqldb.Postgres {
		return postgresAt(t, version, rows...)
	}
	return sqliteAt(t, version, rows...)
}

func sqliteAt(t *testing.T, version int, rows ...string) string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	// The pragmas the releases opened the file with.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, m := range sqldb.Migrations(sqldb.SQLite) {
		if m.Version > version {
			break
		}
		for _, stmt := range append(m.Stmts, sqliteMigrationsTable) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, '2026-01-01T00:00:00Z')`, m.Version); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range rows {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func postgresAt(t *testing.T, version int, rows ...string) string {
	t.Helper()
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, postgresMigrationsTable); err != nil {
		t.Fatal(err)
	}
	for _, m := range sqldb.Migrations(sqldb.Postgres) {
		if m.Version > version {
			break
		}
		for _, stmt := range m.Stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range rows {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return dsn
}

// TestHistoryUpgradeKeepsWhatIsThere builds a database as the release
// before content history left it (migration 4), with an app at revision 7
// and a record, and opens it: what it held becomes the first revision of
// the record and the app, under an upgrade's audit entry, and writes go on
// from there.
func TestHistoryUpgradeKeepsWhatIsThere(t *testing.T) {
	rows := map[sqldb.Engine][]string{
		sqldb.SQLite: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00.000000000Z')`,
			`INSERT INTO apps (id, organization_id, name, doc, created_at, updated_at, revision) VALUES ('app', 'org', 'App', '{"channels":[{"id":"web"}]}', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', 7)`,
			`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'handler', 'Hi', '{"intentId":"Hi","name":"old"}', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		},
		sqldb.Postgres: {
			`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
			`INSERT INTO apps (id, organization_id, name, doc, created_at, updated_at, revision) VALUES ('app', 'org', 'App', '{"channels":[{"id":"web"}]}', now(), now(), 7)`,
			`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'handler', 'Hi', '{"intentId":"Hi","name":"old"}', now(), now())`,
		},
	}
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			ctx := t.Context()
			s, err := OpenDB(ctx, databaseAt(t, e, 4, rows[e]...))
			if err != nil {
				t.Fatalf("open the database of the release before: %v", err)
			}
			defer s.Close()
			rec, err := s.Record(ctx, "app", content.KindHandler, "Hi")
			if err != nil || rec.Revision != 7 {
				t.Fatalf("record = %+v, %v; want it at the app's revision 7", rec, err)
			}
			revs, err := s.Revisions(ctx, "app", content.KindHandler, "Hi", 0, 0)
			if err != nil || len(revs) != 1 || revs[0].Revision != 7 || !strings.Contains(string(revs[0].Doc), `"old"`) {
				t.Fatalf("revisions = %+v, %v; want what it held, at 7", revs, err)
			}
			if apps, err := s.Revisions(ctx, "app", content.KindApp, "app", 0, 0); err != nil || len(apps) != 1 || !strings.Contains(string(apps[0].Doc), `"name":"App"`) || !strings.Contains(string(apps[0].Doc), `"channels"`) {
				t.Errorf("the app's revisions = %+v, %v", apps, err)
			}
			log, err := s.AuditLog(ctx, content.AuditFilter{AppID: "app"})
			if err != nil || len(log) != 1 || log[0].Operation != "upgrade" || log[0].Actor.LocalUser != "schema upgrade" || log[0].ID != revs[0].AuditID {
				t.Fatalf("audit log = %+v, %v; want the upgrade's entry, which the revision names", log, err)
			}
			updated, err := s.UpdateRecord(contenttest.Acting(ctx), "app", content.KindHandler, "Hi", 7, func(r content.Record) (content.Record, error) {
				r.Doc = []byte(`{"intentId":"Hi","name":"new"}`)
				return r, nil
			})
			if err != nil || updated.Revision != 8 {
				t.Fatalf("update after the upgrade = %+v, %v; want revision 8", updated, err)
			}
			if revs, _ := s.Revisions(ctx, "app", content.KindHandler, "Hi", 0, 0); len(revs) != 2 {
				t.Errorf("after an update, %d revisions; want 2", len(revs))
			}
		})
	}
}
