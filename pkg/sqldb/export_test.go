package sqldb

import "github.com/jackc/pgx/v5/pgxpool"

// PostgresVersion reads a PostgreSQL database's schema version without
// migrating it: 0 for an empty database.
var PostgresVersion = postgresVersion

// Pool is the pgx pool behind a PostgreSQL database, nil for SQLite.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }
