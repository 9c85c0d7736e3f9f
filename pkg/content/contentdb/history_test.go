package contentdb

import (
	"context"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
)

// TestChangesOutsideTheStoreAreRefused: the database itself keeps every
// change's revision. A write made by raw SQL, as an old release or a
// hand-made script would, is refused on both engines: without an audit
// entry in its transaction (PostgreSQL), or with a revision the record
// already has (SQLite, where the app's newest entry is any writer's).
func TestChangesOutsideTheStoreAreRefused(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.newDB(t)
			s := openDB(t, dsn)
			withApp(t, s)
			ctx := contenttest.Acting(t.Context())
			if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindHandler, ID: "H", Doc: []byte(`{"intentId":"H"}`)}); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`UPDATE records SET doc = '{"intentId":"H","name":"sneaky"}' WHERE id = 'H'`,
				`DELETE FROM records WHERE id = 'H'`,
			} {
				if err := rawExec(t.Context(), s, q); err == nil {
					t.Errorf("%s: not refused", q)
				}
			}
			if got := b.count(t, dsn, `SELECT count(*) FROM records WHERE id = 'H' AND CAST(doc AS TEXT) NOT LIKE '%sneaky%'`); got != 1 {
				t.Errorf("the record changed: %d untouched", got)
			}
		})
	}
}

// rawExec runs a statement on the store's database, outside the store.
func rawExec(ctx context.Context, s *DB, query string) error {
	_, err := s.SQL().SQL().ExecContext(ctx, query)
	return err
}
