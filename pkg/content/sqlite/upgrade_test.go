package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	sqlitedrv "modernc.org/sqlite"

	"github.com/assistantcms/cms/pkg/content"
)

// TestTokensBeforeScopesKeepWhatTheyCouldDo builds a database as the
// release before token scopes left it, with a token in it, and opens it:
// the token keeps every scope it had in effect, and no more.
func TestTokensBeforeScopesKeepWhatTheyCouldDo(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "content.db")
	conn, err := sqlitedrv.NewConnector(dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	for _, m := range migrations() {
		if m.version > 2 {
			break
		}
		for _, stmt := range append(m.stmts, createMigrationsTable) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("migration %d: %v", m.version, err)
			}
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, '2026-01-01T00:00:00Z')`, m.version); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', '2026-01-01T00:00:00Z')`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', x'01', 'org', 'app', 'web', '2026-01-01T00:00:00Z')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the database of the release before: %v", err)
	}
	defer s.Close()
	tok, err := s.Token(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Scopes != content.LegacyScopes {
		t.Errorf("a token made before scopes has %s, want %s", tok.Scopes, content.LegacyScopes)
	}
	if tok.Scopes.Has(content.EventsRead) {
		t.Error("a token made before scopes may read events back, which it never could")
	}
}
