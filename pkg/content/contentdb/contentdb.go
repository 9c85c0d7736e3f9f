// Package contentdb opens the content database a DSN names, so that every
// command takes one setting: a postgres:// or postgresql:// URL opens
// PostgreSQL, shared by any number of replicas; anything else is the path
// of a SQLite file, for a single node.
package contentdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/postgres"
	"github.com/assistantcms/cms/pkg/content/sqlite"
)

// Store is what both backends offer.
type Store interface {
	content.Store
	Ping(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int, error)

	// LoadVectors returns the vectors stored for the app and model among
	// hashes (each the SHA-256 of what was embedded, as the caller
	// defines it), and marks them used now. Hashes without a vector, or
	// whose stored bytes are not finite float32s, are absent from the map.
	LoadVectors(ctx context.Context, app, model string, hashes [][32]byte) (map[[32]byte][]float32, error)
	// SaveVectors stores vectors for the app and model, replacing those
	// under the same hashes, and marks them used now. The app must exist;
	// vectors must be non-empty and finite. A save that fails may have
	// stored some of them.
	SaveVectors(ctx context.Context, app, model string, vectors map[[32]byte][]float32) error
	// PruneVectors deletes the app's vectors of the model neither saved
	// nor loaded since unusedSince, and returns how many.
	PruneVectors(ctx context.Context, app, model string, unusedSince time.Time) (int, error)
}

// IsPostgres reports whether dsn names a PostgreSQL database: a URL, or
// libpq's keyword form ("host=db dbname=cms ...").
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || isKeywords(dsn)
}

func isKeywords(dsn string) bool {
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "host=") || strings.HasPrefix(f, "dbname=") {
			return true
		}
	}
	return false
}

// Open opens and migrates the database dsn names. Errors never repeat a
// PostgreSQL URL, which may hold a password.
func Open(ctx context.Context, dsn string) (Store, error) {
	if IsPostgres(dsn) {
		s, err := postgres.Open(ctx, dsn) // its errors name the database
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open content database %s: %w", dsn, err)
	}
	return s, nil
}

// Describe names the database for logs: a PostgreSQL URL without its
// user information and parameters, a SQLite path as it is.
func Describe(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	if isKeywords(dsn) {
		var kept []string
		for _, f := range strings.Fields(dsn) {
			if strings.HasPrefix(f, "host=") || strings.HasPrefix(f, "port=") || strings.HasPrefix(f, "dbname=") {
				kept = append(kept, f)
			}
		}
		return strings.Join(kept, " ")
	}
	rest := dsn[strings.Index(dsn, "://")+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q]
	}
	return "postgres://" + rest
}
