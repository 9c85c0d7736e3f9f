package chstore

import (
	"context"
	"sync"
)

// Lazy is a Store opened on first use and opened again after a failure, so
// that a service reading ClickHouse on the side (the api's suggestions
// and analytics page) starts and serves while ClickHouse is down, and
// recovers once it is back. It is safe for concurrent use.
type Lazy struct {
	cfg   Config
	mu    sync.Mutex
	store *Store
}

// NewLazy returns a Lazy connecting with cfg; nothing is dialled yet.
func NewLazy(cfg Config) *Lazy { return &Lazy{cfg: cfg} }

// Do runs f with the Store, opening it first if needed. When f fails for
// any reason but ctx ending, the Store is closed, so that the next call
// connects afresh.
func (l *Lazy) Do(ctx context.Context, f func(*Store) error) error {
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := f(s); err != nil {
		if ctx.Err() == nil {
			l.drop(s)
		}
		return err
	}
	return nil
}

func (l *Lazy) open(ctx context.Context) (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		s, err := Open(ctx, l.cfg)
		if err != nil {
			return nil, err
		}
		l.store = s
	}
	return l.store, nil
}

// drop closes s unless another call has already replaced it.
func (l *Lazy) drop(s *Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == s {
		l.store = nil
		_ = s.Close()
	}
}

// Close releases the connection, if one is open.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return nil
	}
	err := l.store.Close()
	l.store = nil
	return err
}
