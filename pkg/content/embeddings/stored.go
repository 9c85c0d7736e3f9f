package embeddings

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// VectorStore keeps vectors by app, model and content hash where they
// outlive the process and are shared by every replica (the content
// database).
type VectorStore interface {
	LoadVectors(ctx context.Context, app, model string, hashes [][32]byte) (map[[32]byte][]float32, error)
	SaveVectors(ctx context.Context, app, model string, vectors map[[32]byte][]float32) error
	PruneVectors(ctx context.Context, app, model string, unusedSince time.Time) (int, error)
}

// Tuning of Stored.
const (
	// StoredRetention is how long a stored vector no build has used is
	// kept: long enough for a replica still on an older revision, or an
	// edit taken back.
	StoredRetention = 7 * 24 * time.Hour
	// pruneEvery is how often an app's unused vectors are looked for.
	pruneEvery = time.Hour
)

// Stored embeds apps' content through a VectorStore: a text whose vector
// is stored is not embedded again, by this process after a restart or by
// any other replica, and what the embedder makes is stored. Only content
// goes through it, never questions, which are personal and would make
// the store grow without bound. A store that fails is logged and passed
// by: the content is embedded as if nothing were stored. Safe for
// concurrent use.
type Stored struct {
	store VectorStore
	emb   Embedder
	log   *slog.Logger

	mu     sync.Mutex
	pruned map[string]time.Time // app -> when its unused vectors were last pruned
	// sweepAt is how many apps pruned holds when it is next swept.
	sweepAt int
}

// minSweep is the least number of apps pruned holds before it is swept.
const minSweep = 1024

// sweepLocked drops the apps pruned long enough ago to be due again,
// which an absent entry means too, once the map has doubled since the
// last sweep: a replica serving ever more apps keeps only those pruned
// within the hour. s.mu is held.
func (s *Stored) sweepLocked(now time.Time) {
	if len(s.pruned) < max(s.sweepAt, minSweep) {
		return
	}
	for app, at := range s.pruned {
		if now.Sub(at) >= pruneEvery {
			delete(s.pruned, app)
		}
	}
	s.sweepAt = 2 * len(s.pruned)
}

// NewStored embeds through store with emb; log may be nil.
func NewStored(store VectorStore, emb Embedder, log *slog.Logger) *Stored {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stored{store: store, emb: emb, log: log, pruned: map[string]time.Time{}}
}

// Model is the embedder's model.
func (s *Stored) Model() string { return s.emb.Model() }

// Embed embeds texts of no app, which are not stored.
func (s *Stored) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return s.emb.Embed(ctx, texts)
}

// EmbedApp answers texts of app from the store, embeds the rest once each
// and stores them.
func (s *Stored) EmbedApp(ctx context.Context, app string, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	model := s.emb.Model()
	keys := make([][32]byte, len(texts))
	for i, t := range texts {
		keys[i] = sha256.Sum256([]byte(t))
	}
	have, err := s.store.LoadVectors(ctx, app, model, keys)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read stored vectors: %w", err)
		}
		s.log.Warn("reading stored vectors failed; embedding the content instead", "app_id", app, "texts", len(texts), "err", err)
		have = nil
	}
	var missing []string
	at := map[[32]byte]int{} // position in missing
	for i, k := range keys {
		if _, ok := have[k]; ok {
			continue
		}
		if _, ok := at[k]; !ok {
			at[k] = len(missing)
			missing = append(missing, texts[i])
		}
	}
	var made [][]float32
	if len(missing) > 0 {
		if made, err = s.emb.Embed(ctx, missing); err != nil {
			return nil, err
		}
		if len(made) != len(missing) {
			return nil, fmt.Errorf("%d vectors for %d texts", len(made), len(missing))
		}
		save := make(map[[32]byte][]float32, len(missing))
		for k, i := range at {
			save[k] = made[i]
		}
		if err := s.store.SaveVectors(ctx, app, model, save); err != nil && ctx.Err() == nil {
			s.log.Warn("storing vectors failed; they will be embedded again after a restart", "app_id", app, "texts", len(save), "err", err)
		}
	}
	out := make([][]float32, len(texts))
	for i, k := range keys {
		if v, ok := have[k]; ok {
			out[i] = v
		} else {
			out[i] = made[at[k]]
		}
	}
	s.prune(ctx, app, model)
	return out, nil
}

// prune deletes app's vectors no build has used for StoredRetention, at
// most once every pruneEvery per app.
func (s *Stored) prune(ctx context.Context, app, model string) {
	now := time.Now()
	s.mu.Lock()
	due := now.Sub(s.pruned[app]) >= pruneEvery
	if due {
		s.pruned[app] = now
		s.sweepLocked(now)
	}
	s.mu.Unlock()
	if !due {
		return
	}
	n, err := s.store.PruneVectors(ctx, app, model, now.Add(-StoredRetention))
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("pruning stored vectors failed", "app_id", app, "err", err)
	case n > 0:
		s.log.Info("pruned stored vectors no build used", "app_id", app, "vectors", n, "unused_for", StoredRetention)
	}
}
