package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestTokensBeforeScopesKeepWhatTheyCouldDo builds a database as the
// release before token scopes left it, with a token in it, and opens it:
// the token keeps every scope it had in effect, and no more.
func TestTokensBeforeScopesKeepWhatTheyCouldDo(t *testing.T) {
	ctx := t.Context()
	dsn := databaseAt(t, 2,
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', now(), now())`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', '\x01', 'org', 'app', 'web', now())`,
	)

	s := openDSN(t, dsn)
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
}

// TestStoredVectorsUpgradeKeepsData builds a database as the release
// before stored vectors left it (migration 3), with an app, a record and a
// token in it, and opens it: migration 4 adds the vectors table, nothing
// else changes, and the app's vectors can be saved and loaded.
func TestStoredVectorsUpgradeKeepsData(t *testing.T) {
	ctx := t.Context()
	dsn := databaseAt(t, 3,
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at, revision) VALUES ('app', 'org', 'App', now(), now(), 7)`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, scopes, created_at) VALUES ('tok', '\x01', 'org', 'app', 'web', 'content:read', now())`,
		`INSERT INTO records (app_id, kind, id, doc, created_at, updated_at) VALUES ('app', 'intent', 'Hours', '{"intentId":"Hours"}', now(), now())`,
	)

	s := openDSN(t, dsn)
	if v, err := s.SchemaVersion(ctx); err != nil || v != 4 {
		t.Fatalf("SchemaVersion = %d, %v; want 4", v, err)
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
}

// databaseAt makes a database as the release of migration version left
// it, with rows inserted, and returns its DSN.
func databaseAt(t *testing.T, version int, rows ...string) string {
	t.Helper()
	ctx := t.Context()
	dsn := server.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, createMigrationsTable); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations() {
		if m.version > version {
			break
		}
		for _, stmt := range m.stmts {
			if _, err := pool.Exec(ctx, stmt); err != nil {
				t.Fatalf("migration %d: %v", m.version, err)
			}
		}
		if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range rows {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return dsn
}
