package contentdb

import (
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
)

// TestContract runs the content.Store contract on each backend.
func TestContract(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			contenttest.Run(t, func(t *testing.T) content.Store {
				return openStore(t, b.newDB(t))
			})
		})
	}
}

// openDB opens dsn with OpenDB and closes it when the test ends.
func openDB(tb testing.TB, dsn string) *DB {
	tb.Helper()
	s, err := OpenDB(tb.Context(), dsn)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestCloseTwice closes a store twice: the second Close returns what the
// first did, and the store no longer reaches the database.
func TestCloseTwice(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := s.Ping(t.Context()); err == nil {
				t.Error("Ping after Close succeeded")
			}
		})
	}
}
