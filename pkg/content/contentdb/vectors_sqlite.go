package contentdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/sqldb"
)

// SQLite statements name at most this many vectors, far below its limit
// of 32,766 variables, so that any number of keys can be asked for in
// turns.
const (
	sqliteLoadChunk = 500
	sqliteSaveChunk = 200 // two variables each
	pruneChunk      = 5000
)

// loadVectorsSQLite adds to out the vectors stored for app and model
// among keys, and marks them used now.
func (s *DB) loadVectorsSQLite(ctx context.Context, app, model, what string, keys [][32]byte, out map[[32]byte][]float32) error {
	// One write transaction for every chunk, since marking rows used is a
	// write: one commit. Each chunk reads and marks its rows in one
	// statement; OR IGNORE, which no row can trigger, spares SQLite the
	// statement journal it would keep to undo a statement that aborts
	// part way (a load of 30,000 rows takes a fifth less time).
	return s.db.InTx(ctx, what, func(tx *sql.Tx) error {
		now := sqldb.FormatTime(time.Now())
		args := make([]any, 0, 3+sqliteLoadChunk)
		for start := 0; start < len(keys); start += sqliteLoadChunk {
			chunk := keys[start:min(start+sqliteLoadChunk, len(keys))]
			args = append(args[:0], now, app, model)
			for i := range chunk {
				args = append(args, chunk[i][:])
			}
			rows, err := tx.QueryContext(ctx, `UPDATE OR IGNORE vectors SET used_at = ? WHERE app_id = ? AND model = ? AND hash IN (`+
				sqldb.Marks(len(chunk))+`) RETURNING hash, vector`, args...)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := readVectors(rows, out); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		return nil
	})
}

// readVectors adds the rows' hashes and vectors to out and closes rows.
func readVectors(rows *sql.Rows, out map[[32]byte][]float32) error {
	defer rows.Close()
	for rows.Next() {
		// RawBytes: the vector is decoded straight from the driver's
		// buffer rather than copied first.
		var hash, vec sql.RawBytes
		if err := rows.Scan(&hash, &vec); err != nil {
			return err
		}
		content.AddStoredVector(out, hash, vec)
	}
	return rows.Err()
}

// saveVectorsSQLite stores the vectors of keys for app and model, in
// one transaction: all of them or none.
func (s *DB) saveVectorsSQLite(ctx context.Context, app, model, what string, keys [][32]byte, vectors map[[32]byte][]float32) error {
	return s.db.InTx(ctx, what, func(tx *sql.Tx) (err error) {
		now := sqldb.FormatTime(time.Now())
		args := make([]any, 0, 3+2*sqliteSaveChunk)
		var full *sql.Stmt // the statement of a whole chunk, prepared once
		defer func() {
			if full != nil {
				_ = full.Close()
			}
		}()
		for start := 0; start < len(keys); start += sqliteSaveChunk {
			chunk := keys[start:min(start+sqliteSaveChunk, len(keys))]
			args = append(args[:0], app, model, now)
			for i := range chunk {
				args = append(args, chunk[i][:], content.AppendVector(nil, vectors[chunk[i]]))
			}
			if len(chunk) == sqliteSaveChunk && full == nil {
				if full, err = tx.PrepareContext(ctx, saveStatement(sqliteSaveChunk)); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			if len(chunk) == sqliteSaveChunk {
				_, err = full.ExecContext(ctx, args...)
			} else {
				_, err = tx.ExecContext(ctx, saveStatement(len(chunk)), args...)
			}
			switch {
			case sqldb.IsForeignKey(err):
				return fmt.Errorf("%s: app %q: %w", what, app, content.ErrNotFound)
			case err != nil:
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		return nil
	})
}

// saveStatement upserts n rows; ?1 to ?3 are the app, model and time.
func saveStatement(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO vectors (app_id, model, used_at, hash, vector) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(`, `)
		}
		b.WriteString(`(?1, ?2, ?3, ?, ?)`)
	}
	b.WriteString(` ON CONFLICT (app_id, model, hash) DO UPDATE SET used_at = excluded.used_at, vector = excluded.vector`)
	return b.String()
}

// pruneVectorsSQLite deletes the vectors of app and model unused since
// unusedSince; turns are each their own transaction, so that other
// writers of the file never wait long behind it.
func (s *DB) pruneVectorsSQLite(ctx context.Context, app, model, what string, unusedSince time.Time) (int, error) {
	since := sqldb.FormatTime(unusedSince)
	total := 0
	for {
		res, err := s.db.SQL().ExecContext(ctx, `DELETE FROM vectors WHERE rowid IN (
			SELECT rowid FROM vectors WHERE app_id = ? AND model = ? AND used_at < ? LIMIT ?)`,
			app, model, since, pruneChunk)
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		total += int(n)
		if n < pruneChunk {
			return total, nil
		}
	}
}
