package embeddings

import (
	"context"
	"sync"
	"testing"
)

// tally embeds each text as its length, counting the texts.
type tally struct {
	mu sync.Mutex
	n  int
}

func (t *tally) Model() string { return "tally" }

func (t *tally) Embed(_ context.Context, texts []string) ([][]float32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += len(texts)
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = []float32{float32(len(s)) + 1}
	}
	return out, nil
}

func (t *tally) inputs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// TestCacheForget: forgetting a tenant drops its vectors alone, and its
// texts are embedded afresh after.
func TestCacheForget(t *testing.T) {
	ctx := context.Background()
	emb := &tally{}
	c := NewCache(100)
	for _, tenant := range []string{"app-1", "app-2"} {
		if _, err := c.EmbedFor(ctx, tenant, emb, []string{"a", "b"}); err != nil {
			t.Fatal(err)
		}
	}
	c.Forget("app-1")
	c.Forget("app-unknown")
	if n1, n2 := c.TenantLen("app-1"), c.TenantLen("app-2"); n1 != 0 || n2 != 2 || c.Len() != 2 {
		t.Fatalf("after forgetting app-1: %d, %d vectors (%d in all); want 0, 2 (2)", n1, n2, c.Len())
	}
	before := emb.inputs()
	if _, err := c.EmbedFor(ctx, "app-1", emb, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := emb.inputs() - before; got != 2 {
		t.Errorf("app-1 after forgetting embedded %d texts, want 2", got)
	}
}
