package contentdb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
)

// PostgreSQL statements name at most this many vectors, passed as one
// array, so that each stays well inside statement_timeout and holds few
// row locks.
const (
	postgresLoadChunk = 1000
	postgresSaveChunk = 500
)

// loadVectors returns the stored vectors among the hashes of $3 and marks
// those used before $4 as used at $4. It skips marking rows another
// transaction has locked (a replica saving or marking them at this
// moment), so that a load never waits on, nor deadlocks with, another
// replica's writes; the SELECT reads the vectors as they were when the
// statement began either way. The hashes are joined rather than tested
// with = ANY, and the rows to mark found by ctid, so that the plan is one
// index probe a hash whatever the planner's statistics say (with none, as
// on a new table, it scanned all the model's rows for each).
const loadVectors = `WITH touched AS (
	UPDATE vectors SET used_at = $4 WHERE ctid = ANY (ARRAY(
		SELECT v.ctid FROM unnest($3::bytea[]) AS k (hash), LATERAL (
			SELECT ctid FROM vectors
			WHERE app_id = $1 AND model = $2 AND hash = k.hash AND used_at < $4
			LIMIT 1 FOR UPDATE SKIP LOCKED) AS v))
)
SELECT k.hash, v.vector FROM unnest($3::bytea[]) AS k (hash), LATERAL (
	SELECT vector FROM vectors WHERE app_id = $1 AND model = $2 AND hash = k.hash LIMIT 1) AS v`

// loadVectorsPostgres adds to out the vectors stored for app and model
// among keys, and marks them used now.
func (s *DB) loadVectorsPostgres(ctx context.Context, app, model, what string, keys [][32]byte, out map[[32]byte][]float32) error {
	at := s.db.Now()
	chunk := make([][]byte, 0, postgresLoadChunk)
	for start := 0; start < len(keys); start += postgresLoadChunk {
		chunk = chunk[:0]
		for i := start; i < min(start+postgresLoadChunk, len(keys)); i++ {
			chunk = append(chunk, keys[i][:])
		}
		if err := s.loadChunk(ctx, app, model, chunk, at, out); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// loadChunk reads through pgx itself rather than database/sql, which
// copies every bytea value once more: a new replica loads an app's
// vectors by the tens of thousands, and that copy made the load a quarter
// slower.
func (s *DB) loadChunk(ctx context.Context, app, model string, hashes [][]byte, at time.Time, out map[[32]byte][]float32) error {
	rows, err := s.db.Pool().Query(ctx, loadVectors, app, model, hashes, at)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		// DriverBytes: decoded straight from the connection's buffer
		// rather than copied first.
		var hash, vec pgtype.DriverBytes
		if err := rows.Scan(&hash, &vec); err != nil {
			return err
		}
		content.AddStoredVector(out, hash, vec)
	}
	return rows.Err()
}

// saveVectors upserts the rows of the arrays $3 and $4, in hash order.
const saveVectors = `INSERT INTO vectors (app_id, model, hash, vector, used_at)
SELECT $1, $2, v.hash, v.vector, $5 FROM unnest($3::bytea[], $4::bytea[]) AS v (hash, vector)
ORDER BY v.hash
ON CONFLICT (app_id, model, hash) DO UPDATE SET vector = excluded.vector, used_at = excluded.used_at`

// saveVectorsPostgres stores the vectors of keys for app and model.
//
// Each statement of up to postgresSaveChunk vectors commits on its own: replicas
// that embedded the same new texts save them at about the same time, and
// with one transaction for the whole save the later one would hold its
// row locks waiting for the earlier to commit, up to lock_timeout. Rows
// are written in hash order in every save, so concurrent saves wait for
// each other rather than deadlock. A save that fails part way keeps the
// vectors it wrote, which are correct, and the caller may save again.
func (s *DB) saveVectorsPostgres(ctx context.Context, app, model, what string, keys [][32]byte, vectors map[[32]byte][]float32) error {
	at := s.db.Now()
	hashes := make([][]byte, 0, postgresSaveChunk)
	vecs := make([][]byte, 0, postgresSaveChunk)
	for start := 0; start < len(keys); start += postgresSaveChunk {
		hashes, vecs = hashes[:0], vecs[:0]
		for i := start; i < min(start+postgresSaveChunk, len(keys)); i++ {
			hashes = append(hashes, keys[i][:])
			vecs = append(vecs, content.AppendVector(nil, vectors[keys[i]]))
		}
		_, err := s.db.SQL().ExecContext(ctx, saveVectors, app, model, hashes, vecs, at)
		switch {
		case sqldb.IsForeignKey(err):
			return fmt.Errorf("%s: app %q: %w", what, app, content.ErrNotFound)
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// pruneVectors deletes up to $4 rows of the app's model unused since $3.
// Rows another transaction has locked are being saved or loaded, so used:
// they are skipped rather than waited for. Rows are deleted by ctid, which
// keeps the plan a scan of the app's model whatever the statistics say.
const pruneVectors = `DELETE FROM vectors WHERE used_at < $3 AND ctid = ANY (ARRAY(
	SELECT ctid FROM vectors WHERE app_id = $1 AND model = $2 AND used_at < $3
	LIMIT $4 FOR UPDATE SKIP LOCKED))`

// pruneVectorsPostgres deletes the vectors of app and model unused since
// unusedSince, compared to the microsecond.
func (s *DB) pruneVectorsPostgres(ctx context.Context, app, model, what string, unusedSince time.Time) (int, error) {
	total := 0
	for {
		res, err := s.db.SQL().ExecContext(ctx, pruneVectors, app, model, unusedSince, pruneChunk)
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		n64, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		n := int(n64)
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}
