package sqldb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Connection parameters set unless the DSN sets them; see the package
// comment.
const (
	defaultStatementTimeout = "5s"
	defaultLockTimeout      = "3s"
)

func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open content database: %w", parseError(err))
	}
	name := describe(cfg.ConnConfig)
	setDefault(cfg.ConnConfig, "statement_timeout", defaultStatementTimeout)
	setDefault(cfg.ConnConfig, "lock_timeout", defaultLockTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open content database %s: %w", name, err)
	}
	db := &DB{sql: stdlib.OpenDBFromPool(pool), engine: Postgres, name: name, pool: pool,
		listen: cfg.ConnConfig.Copy(), closed: make(chan struct{})}
	if err := db.init(ctx); err != nil {
		_ = db.sql.Close()
		pool.Close()
		return nil, fmt.Errorf("open content database %s: %w", name, err)
	}
	return db, nil
}

// parseError keeps the reason of pgx's parse error and leaves out the
// connection string it quotes, whose password pgx hides only on a best
// effort basis.
func parseError(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+len("`: "):]
	}
	return errors.New("cannot parse the DSN: " + msg)
}

// setDefault sets a run-time parameter on every connection unless the DSN
// already does, directly or through options.
func setDefault(cc *pgx.ConnConfig, name, value string) {
	if _, ok := cc.RuntimeParams[name]; ok {
		return
	}
	if strings.Contains(cc.RuntimeParams["options"], name) {
		return
	}
	cc.RuntimeParams[name] = value
}

func describe(cc *pgx.ConnConfig) string {
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
}
