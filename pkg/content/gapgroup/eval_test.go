package gapgroup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
)

// labelled are the wordings of testdata/needs.json with their needs, in
// an order that stands for how often each was asked: a fixed shuffle.
func labelled(t testing.TB) (texts, needs []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "needs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Needs []struct {
			Need     string   `json:"need"`
			Wordings []string `json:"wordings"`
		} `json:"needs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("testdata/needs.json: %v", err)
	}
	type item struct {
		text, need string
		key        [32]byte
	}
	var items []item
	for _, n := range doc.Needs {
		for _, w := range n.Wordings {
			items = append(items, item{w, n.Need, sha256.Sum256([]byte(w))})
		}
	}
	if len(doc.Needs) < 50 || len(items) < 300 {
		t.Fatalf("testdata/needs.json has %d needs and %d wordings, want at least 50 and 300", len(doc.Needs), len(items))
	}
	slices.SortFunc(items, func(a, b item) int { return slices.Compare(a.key[:], b.key[:]) })
	for _, it := range items {
		texts, needs = append(texts, it.text), append(needs, it.need)
	}
	return texts, needs
}

// precisionAtRecall ranks every pair of the vectors by the cosine of
// their centred forms and answers the precision of the pairs ranked above
// the one at which recall reaches the given share of pairs with one need.
func precisionAtRecall(vectors [][]float32, reference []float32, labels []string, recall float64) float64 {
	c, err := centre(vectors, reference)
	if err != nil {
		panic(err)
	}
	vs, err := embeddings.NewVectors(c)
	if err != nil {
		panic(err)
	}
	type pair struct {
		sim  float32
		same bool
	}
	var pairs []pair
	positives := 0
	for i := range c {
		p, _ := vs.Probe(c[i])
		for j := i + 1; j < len(c); j++ {
			same := labels[i] == labels[j]
			if same {
				positives++
			}
			pairs = append(pairs, pair{vs.Similarity(j, p), same})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(b.sim, a.sim) })
	found := 0
	for k, p := range pairs {
		if p.same {
			found++
		}
		if float64(found) >= recall*float64(positives) {
			return float64(found) / float64(k+1)
		}
	}
	return 0
}

func testEncoder(t testing.TB) *encoder.Encoder {
	t.Helper()
	dir := os.Getenv("ENCODER_DIR")
	if dir == "" {
		dir, _ = encoder.Locate()
	}
	e, err := encoder.Load(dir)
	if err != nil {
		t.Fatalf("%v (go run ./dev/test installs the model, or point ENCODER_DIR at it)", err)
	}
	return e
}

// TestGroupingQuality measures pairwise precision and recall of grouping
// the labelled wordings by meaning with the built-in encoder, at the
// default threshold, beside the grouping by words at its own. It holds
// the figures measured when the grouping was chosen, so that a change
// that loses quality fails; the goal of precision 0.9 with recall 0.6 is
// out of the built-in encoder's reach on these needs (see
// docs/analytics.md).
func TestGroupingQuality(t *testing.T) {
	texts, needs := labelled(t)
	e := testEncoder(t)
	vectors, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	reference, err := e.Embed(context.Background(), ReferenceQuestions())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ByMeaning(vectors, Mean(reference), DefaultThreshold)
	if err != nil {
		t.Fatal(err)
	}
	p, r := Pairwise(groups, needs)
	wp, wr := Pairwise(ByWords(texts, DefaultWordsThreshold), needs)
	t.Logf("%d wordings of %d needs", len(texts), len(slices.Compact(slices.Sorted(slices.Values(needs)))))
	t.Logf("by meaning (threshold %.2f): %d groups, precision %.3f, recall %.3f", DefaultThreshold, len(groups), p, r)
	t.Logf("by words (threshold %.2f): precision %.3f, recall %.3f", DefaultWordsThreshold, wp, wr)
	if p < 0.53 || r < 0.18 {
		t.Errorf("by meaning: precision %.3f, recall %.3f; measured 0.550 and 0.198 when chosen", p, r)
	}
	for _, th := range []float32{0.4, 0.45, 0.5, 0.55, 0.6} {
		g, _ := ByMeaning(vectors, Mean(reference), th)
		p, r := Pairwise(g, needs)
		t.Logf("  threshold %.2f: precision %.3f, recall %.3f", th, p, r)
	}
	// A few wordings of one need, alone: the reference keeps their
	// own differences from being all that is left.
	few := []string{"do you sell skateboards", "skateboards available?", "can i buy a skateboard here", "what time do you open on saturday"}
	fv, err := e.Embed(context.Background(), few)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := ByMeaning(fv, Mean(reference), DefaultThreshold); err != nil || fmt.Sprint(g) != "[[0 1 2] [3]]" {
		t.Errorf("%q grouped %v, %v; want the skateboards together", few, g, err)
	}
	// The most any threshold on the pairs' similarity can do: the
	// precision of the pairs above the similarity at which 60% of the
	// pairs of one need are reached.
	ceiling := precisionAtRecall(vectors, Mean(reference), needs, 0.6)
	t.Logf("pairs ranked by similarity, at recall 0.60: precision %.3f", ceiling)
	if ceiling < 0.25 || ceiling > 0.30 {
		t.Errorf("at recall 0.6 the pairs ranked by similarity have precision %.3f; docs/analytics.md states 0.27", ceiling)
	}
	if r < 3*wr {
		t.Errorf("by meaning finds %.3f of the pairs, by words %.3f: want at least three times as many", r, wr)
	}
}
