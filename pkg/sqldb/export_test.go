package sqldb

// PostgresVersion reads a PostgreSQL database's schema version without
// migrating it: 0 for an empty database.
var PostgresVersion = postgresVersion
