package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/assistantcms/cms/pkg/content"
)

// TestTokensBeforeScopesKeepWhatTheyCouldDo builds a database as the
// release before token scopes left it, with a token in it, and opens it:
// the token keeps every scope it had in effect, and no more.
func TestTokensBeforeScopesKeepWhatTheyCouldDo(t *testing.T) {
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
		if m.version > 2 {
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
	for _, stmt := range []string{
		`INSERT INTO organizations (id, name, created_at) VALUES ('org', 'Org', now())`,
		`INSERT INTO apps (id, organization_id, name, created_at, updated_at) VALUES ('app', 'org', 'App', now(), now())`,
		`INSERT INTO tokens (id, hash, organization_id, app_id, name, created_at) VALUES ('old', '\x01', 'org', 'app', 'web', now())`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}

	s := openDSN(t, dsn)
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
