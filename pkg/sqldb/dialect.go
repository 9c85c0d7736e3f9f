package sqldb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Q is query, written with ? placeholders, in the engine's form:
// PostgreSQL numbers them ($1, $2, ...). Queries hold no '?' in literals.
func (db *DB) Q(query string) string {
	if db.engine != Postgres || strings.IndexByte(query, '?') < 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] != '?' {
			b.WriteByte(query[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// Times are kept as SQLite text, or in PostgreSQL as timestamptz, to the
// microsecond, with, when the time is precise (set by a caller, to the
// nanosecond), a column <name>_ns with the nanoseconds past it.

// TimeColumns names the columns of the time column col, for a column list
// or an ORDER BY.
func (db *DB) TimeColumns(col string, precise bool) string {
	if db.engine == Postgres && precise {
		return col + ", " + col + "_ns"
	}
	return col
}

// TimeMarks is the placeholders of one time's columns.
func (db *DB) TimeMarks(precise bool) string {
	if db.engine == Postgres && precise {
		return "?, ?"
	}
	return "?"
}

// TimeArgs is t as the arguments of its columns.
func (db *DB) TimeArgs(t time.Time, precise bool) []any {
	if db.engine != Postgres {
		return []any{FormatTime(t)}
	}
	// Truncate rounds down, also before 1970, so the pair orders as t does.
	t = t.UTC()
	us := t.Truncate(time.Microsecond)
	if precise {
		return []any{us, int16(t.Sub(us))}
	}
	return []any{us}
}

// NullTimeArgs is TimeArgs, with NULL for a zero t.
func (db *DB) NullTimeArgs(t time.Time, precise bool) []any {
	if !t.IsZero() {
		return db.TimeArgs(t, precise)
	}
	if db.engine == Postgres && precise {
		return []any{nil, 0}
	}
	return []any{nil}
}

// SetTime is an UPDATE's assignment of a time column.
func (db *DB) SetTime(col string, precise bool) string {
	if db.engine == Postgres && precise {
		return col + " = ?, " + col + "_ns = ?"
	}
	return col + " = ?"
}

// Now is the time the store sets: what the engine keeps of it, so that
// what a write returns is what a read gives back.
func (db *DB) Now() time.Time {
	t := time.Now().UTC()
	if db.engine == Postgres {
		return t.Truncate(time.Microsecond)
	}
	return t
}

// Time receives a time column (and its _ns column) from a row.
type Time struct {
	text sql.NullString
	at   sql.NullTime
	ns   sql.NullInt16
	pg   bool
	// precise says whether ns is read.
	precise bool
}

// NewTime returns where to scan one time.
func (db *DB) NewTime(precise bool) *Time {
	return &Time{pg: db.engine == Postgres, precise: precise}
}

// Dests are the scan destinations of the time's columns.
func (t *Time) Dests() []any {
	switch {
	case !t.pg:
		return []any{&t.text}
	case t.precise:
		return []any{&t.at, &t.ns}
	}
	return []any{&t.at}
}

// Value is the time read, zero for NULL.
func (t *Time) Value() (time.Time, error) {
	if !t.pg {
		if !t.text.Valid {
			return time.Time{}, nil
		}
		return parseTime(t.text.String)
	}
	if !t.at.Valid {
		return time.Time{}, nil
	}
	return t.at.Time.UTC().Add(time.Duration(t.ns.Int16)), nil
}

// DocMark is the placeholder of a JSON document.
func (db *DB) DocMark() string {
	if db.engine == Postgres {
		// Text and a cast work in every query mode pgx offers: in some a
		// []byte goes as bytea.
		return "?::jsonb"
	}
	return "?"
}

// DocArg is a document as the argument of DocMark: {} when empty.
func DocArg(doc []byte) string {
	if len(doc) == 0 {
		return "{}"
	}
	return string(doc)
}

// ReadDoc is a document as read from the database, in the form it was
// written: PostgreSQL's jsonb text (keys ordered by length, spaces after
// separators) is made canonical again.
func (db *DB) ReadDoc(raw []byte) (json.RawMessage, error) {
	if db.engine != Postgres {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their digits
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Lock is a row-locking clause (" FOR UPDATE", " FOR NO KEY UPDATE") on
// PostgreSQL, and nothing on SQLite, whose transactions hold the whole
// file.
func (db *DB) Lock(clause string) string {
	if db.engine == Postgres {
		return clause
	}
	return ""
}

// Exclusive makes transactions that call it with the same key take turns,
// until they end: a PostgreSQL advisory lock. SQLite's transactions take
// turns anyway.
func (db *DB) Exclusive(ctx context.Context, tx *sql.Tx, key int64) error {
	if db.engine != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, key)
	return err
}

// RevisionChannel is the PostgreSQL notification channel of app changes;
// the payload is the app's ID.
const RevisionChannel = "cms_app_revision"

// Notify announces, on commit of tx, that the apps changed (see
// WatchRevisions). SQLite has nobody to tell: other processes on the file
// check revisions.
func (db *DB) Notify(ctx context.Context, tx *sql.Tx, appIDs ...string) error {
	if db.engine != Postgres || len(appIDs) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, id) FROM unnest($2::text[]) AS id`, RevisionChannel, appIDs); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// MoveRevision moves the app's revision on in tx and announces it on
// commit (see Notify), in one statement. It returns the new revision and
// the app's organization; found is false when there is no such app.
func (db *DB) MoveRevision(ctx context.Context, tx *sql.Tx, appID string) (rev int64, org string, found bool, err error) {
	if db.engine == Postgres {
		err = tx.QueryRowContext(ctx, `WITH moved AS (UPDATE apps SET revision = revision + 1 WHERE id = $1 RETURNING id, revision, organization_id)
			SELECT revision, organization_id FROM moved, LATERAL pg_notify($2, id)`, appID, RevisionChannel).Scan(&rev, &org)
	} else {
		err = db.move.QueryRowIn(ctx, tx, appID).Scan(&rev, &org)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	return rev, org, err == nil, err
}

// SQLSTATEs of PostgreSQL.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	undefinedTable      = "42P01"
)

// IsDuplicate reports whether err is a uniqueness violation.
func IsDuplicate(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE ||
		pgCode(err) == uniqueViolation
}

// IsForeignKey reports whether err is a foreign key violation.
func IsForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY || pgCode(err) == foreignKeyViolation
}

// sqliteCode is the extended result code of a SQLite error, or 0.
func sqliteCode(err error) int {
	var e *sqlitedrv.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// pgCode is the SQLSTATE of a PostgreSQL server error, or "".
func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
