package contentdb

import (
	"context"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
)

// Stored vectors are where the engines differ most, in how a statement
// names many rows (a list of placeholders, an array) and in how rows
// others are writing are skipped: each has its own statements, after the
// checks here.

// LoadVectors implements Store. Rows that do not hold a whole number of
// finite float32s are left out, as if absent, so that the caller embeds
// the text again and SaveVectors overwrites them.
func (s *DB) LoadVectors(ctx context.Context, app, model string, hashes [][32]byte) (map[[32]byte][]float32, error) {
	if err := content.CheckVectorOwner(app, model); err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	keys := content.SortedVectorKeys(hashes)
	out := make(map[[32]byte][]float32, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	what := fmt.Sprintf("load vectors of app %q, model %q", app, model)
	var err error
	if s.db.Engine() == sqldb.Postgres {
		err = s.loadVectorsPostgres(ctx, app, model, what, keys, out)
	} else {
		err = s.loadVectorsSQLite(ctx, app, model, what, keys, out)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SaveVectors implements Store: it stores vectors for app and model,
// replacing those stored under the same hashes, in hash order, and marks
// them used now. The app must exist.
func (s *DB) SaveVectors(ctx context.Context, app, model string, vectors map[[32]byte][]float32) error {
	if err := content.CheckVectorOwner(app, model); err != nil {
		return fmt.Errorf("save vectors: %w", err)
	}
	what := fmt.Sprintf("save vectors of app %q, model %q", app, model)
	keys := make([][32]byte, 0, len(vectors))
	for h, v := range vectors {
		if err := content.CheckVector(v); err != nil {
			return fmt.Errorf("%s: hash %x: %w", what, h, err)
		}
		keys = append(keys, h)
	}
	if len(keys) == 0 {
		return nil
	}
	keys = content.SortedVectorKeys(keys)
	if s.db.Engine() == sqldb.Postgres {
		return s.saveVectorsPostgres(ctx, app, model, what, keys, vectors)
	}
	return s.saveVectorsSQLite(ctx, app, model, what, keys, vectors)
}

// PruneVectors implements Store: it deletes the vectors of app and model
// neither saved nor loaded since unusedSince, in turns of pruneChunk rows
// each committing on its own, and returns how many.
func (s *DB) PruneVectors(ctx context.Context, app, model string, unusedSince time.Time) (int, error) {
	if err := content.CheckVectorOwner(app, model); err != nil {
		return 0, fmt.Errorf("prune vectors: %w", err)
	}
	what := fmt.Sprintf("prune vectors of app %q, model %q", app, model)
	if unusedSince.IsZero() {
		return 0, fmt.Errorf("%s: zero time", what)
	}
	if s.db.Engine() == sqldb.Postgres {
		return s.pruneVectorsPostgres(ctx, app, model, what, unusedSince)
	}
	return s.pruneVectorsSQLite(ctx, app, model, what, unusedSince)
}
