package embeddings_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// countingEmbedder embeds a text as its length and first byte, and
// records what it was asked to embed.
type countingEmbedder struct {
	mu    sync.Mutex
	asked []string
}

func (c *countingEmbedder) Model() string { return "counting" }

func (c *countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		c.asked = append(c.asked, t)
		first := float32(0)
		if t != "" {
			first = float32(t[0])
		}
		out[i] = []float32{float32(len(t)) + 1, first}
	}
	return out, nil
}

func (c *countingEmbedder) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.asked
	c.asked = nil
	slices.Sort(a)
	return a
}

func openStore(t *testing.T, path string, apps ...string) *contentdb.DB {
	t.Helper()
	s, err := contentdb.OpenDB(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	if len(apps) > 0 {
		if err := s.CreateOrganization(contenttest.Acting(t.Context()), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range apps {
		if err := s.CreateApp(contenttest.Acting(t.Context()), tenancy.App{ID: id, OrganizationID: "org", Name: id, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestStoredEmbedsEachTextOnce: what one process embedded, a restart (a
// new Stored on the same database) and a new revision do not embed again;
// each app's vectors are its own; a text repeated within a call is
// embedded once.
func TestStoredEmbedsEachTextOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.db")
	store := openStore(t, path, "shop", "bank")
	emb := &countingEmbedder{}
	ctx := t.Context()

	steps := []struct {
		name      string
		fresh     bool // a new Stored: a restart, or another replica
		app       string
		texts     []string
		wantAsked []string
	}{
		{"first build", false, "shop", []string{"returns", "delivery", "returns", "gift cards"}, []string{"delivery", "gift cards", "returns"}},
		{"same revision after a restart", true, "shop", []string{"returns", "delivery", "gift cards"}, nil},
		{"a new revision embeds what changed", false, "shop", []string{"returns", "delivery", "opening hours"}, []string{"opening hours"}},
		{"another app embeds its own", false, "bank", []string{"returns"}, []string{"returns"}},
	}
	stored := embeddings.NewStored(store, emb, nil)
	for _, st := range steps {
		if st.fresh {
			stored = embeddings.NewStored(openStore(t, path), emb, nil)
		}
		got, err := stored.EmbedApp(ctx, st.app, st.texts)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if asked := emb.take(); !slices.Equal(asked, st.wantAsked) {
			t.Errorf("%s: embedded %q, want %q", st.name, asked, st.wantAsked)
		}
		want, _ := (&countingEmbedder{}).Embed(ctx, st.texts)
		for i := range st.texts {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: %q gave %v, want %v", st.name, st.texts[i], got[i], want[i])
			}
		}
	}
}

// TestStoredPassesByAFailingStore: a store that cannot be read or written
// costs embedding, never an answer.
func TestStoredPassesByAFailingStore(t *testing.T) {
	store := openStore(t, filepath.Join(t.TempDir(), "content.db"), "shop")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	emb := &countingEmbedder{}
	got, err := embeddings.NewStored(store, emb, nil).EmbedApp(t.Context(), "shop", []string{"a", "b"})
	if err != nil || len(got) != 2 {
		t.Fatalf("EmbedApp with a closed store: %v, %d vectors; want 2 vectors", err, len(got))
	}
	if asked := emb.take(); !slices.Equal(asked, []string{"a", "b"}) {
		t.Errorf("embedded %q, want both texts", asked)
	}
}
