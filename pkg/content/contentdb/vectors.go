package contentdb

import (
	"context"
	"time"

	"github.com/assistantcms/cms/pkg/sqldb"
)

// Stored vectors are where the engines differ most, in how a statement
// names many rows (a list of placeholders, an array) and in how rows
// others are writing are skipped: each has its own statements.

// LoadVectors implements Store.
func (s *DB) LoadVectors(ctx context.Context, app, model string, hashes [][32]byte) (map[[32]byte][]float32, error) {
	if s.db.Engine() == sqldb.Postgres {
		return s.loadVectorsPostgres(ctx, app, model, hashes)
	}
	return s.loadVectorsSQLite(ctx, app, model, hashes)
}

// SaveVectors implements Store.
func (s *DB) SaveVectors(ctx context.Context, app, model string, vectors map[[32]byte][]float32) error {
	if s.db.Engine() == sqldb.Postgres {
		return s.saveVectorsPostgres(ctx, app, model, vectors)
	}
	return s.saveVectorsSQLite(ctx, app, model, vectors)
}

// PruneVectors implements Store.
func (s *DB) PruneVectors(ctx context.Context, app, model string, unusedSince time.Time) (int, error) {
	if s.db.Engine() == sqldb.Postgres {
		return s.pruneVectorsPostgres(ctx, app, model, unusedSince)
	}
	return s.pruneVectorsSQLite(ctx, app, model, unusedSince)
}
