package chstore

import (
	"context"
	"sync"
)

// Reconnecting is a Store opened when first needed and opened again after
// a failure, so that a service reading ClickHouse on the side (the api's
// suggestions and analytics page) starts and serves while ClickHouse is
// down, and recovers once it is back. It is safe for concurrent use.
type Reconnecting struct {
	cfg   Config
	mu    sync.Mutex
	store *Store
}

// NewReconnecting returns a Reconnecting connecting with cfg; nothing is
// dialled yet.
func NewReconnecting(cfg Config) *Reconnecting { return &Reconnecting{cfg: cfg} }

// Do runs f with the Store, opening it first if needed. When f fails for
// any reason but ctx ending, the Store is closed, so that the next call
// connects afresh.
func (r *Reconnecting) Do(ctx context.Context, f func(*Store) error) error {
	s, err := r.open(ctx)
	if err != nil {
		return err
	}
	if err := f(s); err != nil {
		if ctx.Err() == nil {
			r.drop(s)
		}
		return err
	}
	return nil
}

func (r *Reconnecting) open(ctx context.Context) (*Store, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == nil {
		s, err := Open(ctx, r.cfg)
		if err != nil {
			return nil, err
		}
		r.store = s
	}
	return r.store, nil
}

// drop closes s unless another call has already replaced it.
func (r *Reconnecting) drop(s *Store) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == s {
		r.store = nil
		_ = s.Close()
	}
}

// Close releases the connection, if one is open.
func (r *Reconnecting) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.store == nil {
		return nil
	}
	err := r.store.Close()
	r.store = nil
	return err
}
