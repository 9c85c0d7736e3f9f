package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeoutMillis is how long a statement waits for another connection or
// process holding the write lock before failing with SQLITE_BUSY.
const busyTimeoutMillis = 5000

// maxSQLiteConns bounds the pool of connections to the file.
const maxSQLiteConns = 8

func openSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("open content database: empty path")
	}
	base, err := sqlitedrv.NewConnector(sqliteDSN(path))
	if err != nil {
		return nil, fmt.Errorf("open content database %s: %w", path, err)
	}
	sdb := sql.OpenDB(busyRetryConnector{base})
	// Writers take turns on the file anyway; a bounded pool that stays open
	// avoids re-running the DSN pragmas, which take file locks, per burst.
	sdb.SetMaxOpenConns(maxSQLiteConns)
	sdb.SetMaxIdleConns(maxSQLiteConns)
	db := &DB{sql: sdb, engine: SQLite, name: path, closed: make(chan struct{})}
	if err := db.init(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open content database %s: %w", path, err), sdb.Close())
	}
	return db, nil
}

// sqliteDSN builds a URI filename. Pragmas go in the DSN so that every
// connection the pool opens gets them, not only the first. _txlock=immediate
// makes every transaction take the write lock up front, so concurrent
// writers wait on busy_timeout instead of failing when upgrading a read
// lock.
func sqliteDSN(path string) string {
	// Characters meaningful in a URI filename must be escaped in the path.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate",
		escaped, busyTimeoutMillis)
}

// busyRetryConnector retries opening a connection that fails with
// SQLITE_BUSY. SQLite returns BUSY without consulting busy_timeout in some
// lock states, notably while another process is switching a new file to WAL
// or recovering its WAL, and the DSN pragmas run at connection open.
type busyRetryConnector struct{ driver.Connector }

func (c busyRetryConnector) Connect(ctx context.Context) (driver.Conn, error) {
	deadline := time.Now().Add(busyTimeoutMillis * time.Millisecond)
	delay := time.Millisecond
	for {
		conn, err := c.Connector.Connect(ctx)
		if sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return conn, err
		}
		// Jitter keeps processes that collided from retrying in step.
		wait := delay/2 + rand.N(delay)
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}
