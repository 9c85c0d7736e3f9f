package knowledge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// turnEmbedder embeds as bikeConcepts does and notes whether each call
// came within a turn.
type turnEmbedder struct {
	*concepts
	inTurn        *atomic.Bool
	within, apart atomic.Int32
}

func (e *turnEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.inTurn.Load() {
		e.within.Add(1)
	} else {
		e.apart.Add(1)
	}
	return e.concepts.Embed(ctx, texts)
}

// TestBackgroundWorkTakesTurns: with Options.Turn, cutting the content
// into passages and making its vectors run within turns, one at a time,
// and so does embedding it with EmbedInTurns; without, embedding runs
// apart from them. A turn refused fails the build with its reason.
func TestBackgroundWorkTakesTurns(t *testing.T) {
	for _, tt := range []struct {
		name         string
		embedInTurns bool
	}{{"embedding in turns", true}, {"embedding apart", false}} {
		t.Run(tt.name, func(t *testing.T) {
			var inTurn atomic.Bool
			var mu sync.Mutex
			turns := 0
			turn := func(ctx context.Context, work func()) error {
				if !inTurn.CompareAndSwap(false, true) {
					t.Error("two turns at once")
				}
				defer inTurn.Store(false)
				mu.Lock()
				turns++
				mu.Unlock()
				work()
				return nil
			}
			content := &turnEmbedder{concepts: bikeConcepts(), inTurn: &inTurn}
			b, err := New(Content{Documents: hybridDocs, FAQs: hybridFAQs}, Options{Embedder: bikeConcepts(), ContentEmbedder: content, Turn: turn, EmbedInTurns: tt.embedInTurns})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.WaitSemantic(context.Background()); err != nil {
				t.Fatal(err)
			}
			within, apart := content.within.Load(), content.apart.Load()
			mu.Lock()
			n := turns
			mu.Unlock()
			if tt.embedInTurns {
				// Passages, the embedding's part (the content is small) and the vectors.
				if within != 1 || apart != 0 || n != 3 {
					t.Errorf("embedded %d times in turns and %d apart, in %d turns; want 1, 0 and 3", within, apart, n)
				}
			} else if within != 0 || apart != 1 || n != 2 {
				t.Errorf("embedded %d times in turns and %d apart, in %d turns; want 0, 1 and 2", within, apart, n)
			}
			// Answers by meaning, as without turns.
			if q := b.Understand(context.Background(), "my stoppers scream"); q.Fallback != nil {
				t.Fatal(q.Fallback)
			} else if docs := b.SearchQuery(q, "").Documents; len(docs) == 0 || docs[0].Title != "Looking after disc brakes" {
				t.Errorf("found %v first", titles(docs))
			}
		})
	}
	t.Run("a turn refused", func(t *testing.T) {
		refused := errors.New("the wait for a turn ended")
		b, err := New(Content{Documents: hybridDocs, FAQs: hybridFAQs}, Options{Embedder: bikeConcepts(),
			Turn: func(context.Context, func()) error { return refused }})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WaitSemantic(context.Background()); !errors.Is(err, refused) {
			t.Errorf("build ended with %v, want %v", err, refused)
		}
	})
}
