package tenancydb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/devpostgres"
)

// server is the package's PostgreSQL server; each test takes a fresh
// database on it.
var server *devpostgres.Server

func TestMain(m *testing.M) { os.Exit(devpostgres.RunTests(m, &server)) }

// engines are a new database of each engine, as a DSN.
func engines() []struct {
	name string
	dsn  func(t *testing.T) string
} {
	return []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "cms.db") }},
		{"postgres", func(t *testing.T) string { return server.NewDatabase(t) }},
	}
}

// TestContract runs the tenancy.Store contract on a store that Open made,
// as ingest opens it, on each engine.
func TestContract(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			contenttest.RunTenancy(t, func(t *testing.T) contenttest.TenancyStore {
				s, err := Open(t.Context(), e.dsn(t))
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			})
		})
	}
}

// TestCloseReleasesTheDatabase: a store Open made closes its database,
// once; one made with New leaves the database to its owner.
func TestCloseReleasesTheDatabase(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := Open(ctx, e.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			shared, err := New(ctx, s.DB())
			if err != nil {
				t.Fatal(err)
			}
			if err := shared.Close(); err != nil {
				t.Fatalf("Close of a store made with New: %v", err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("the database closed with a store that did not open it: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := s.Ping(ctx); err == nil {
				t.Error("Ping after Close succeeded")
			}
		})
	}
}
