package searcheval

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// TestEvaluationWithEncoder holds ranking by words and meaning, with the
// built-in sentence encoder as the api runs it, to the figures measured
// when it was written (go run ./dev/searcheval prints them all): a
// change that loses what either side finds fails here. The floors sit
// just under the measured values; the goals it does not reach yet are
// noted where they are checked.
func TestEvaluationWithEncoder(t *testing.T) {
	dir := os.Getenv("ENCODER_DIR")
	if dir == "" {
		dir, _ = encoder.Locate()
	}
	enc, err := encoder.Load(dir)
	if err != nil {
		t.Fatalf("%v (go run ./dev/test installs the model, or point ENCODER_DIR at it)", err)
	}
	b := evalBase(t, evalRecords(t), knowledge.Options{
		Lexicon:      wordNet(t),
		Embedder:     embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: enc},
		QueryTimeout: time.Minute, // the race detector slows the encoder down
	})
	ctx := context.Background()
	if err := b.WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	qs := evalQuestions(t)
	by := map[Ranking]Evaluation{}
	users := map[Ranking]Evaluation{}
	for _, r := range []Ranking{Lexical, Vectors, Hybrid} {
		if by[r], err = EvaluateBy(ctx, b, r, qs); err != nil {
			t.Fatal(err)
		}
		if users[r], err = EvaluateBy(ctx, b, r, qs[originalQuestions:]); err != nil {
			t.Fatal(err)
		}
	}
	lex, vec, hyb := by[Lexical], by[Vectors], by[Hybrid]
	t.Logf("search MRR lexical %.3f, vectors %.3f, hybrid %.3f; FAQ %.3f, %.3f, %.3f; users' FAQ %.3f, %.3f, %.3f",
		lex.Search.MRR, vec.Search.MRR, hyb.Search.MRR, lex.FAQ.MRR, vec.FAQ.MRR, hyb.FAQ.MRR,
		users[Lexical].FAQ.MRR, users[Vectors].FAQ.MRR, users[Hybrid].FAQ.MRR)
	t.Logf("by style, lexical / hybrid: %v / %v", lex.ByStyle, hyb.ByStyle)
	t.Logf("RAG lexical %+v, hybrid %+v", lex.RAG, hyb.RAG)

	for _, f := range []struct {
		name      string
		got, want float64
	}{
		// Measured 0.798 (goal 0.80).
		{"search MRR", hyb.Search.MRR, 0.79},
		{"FAQ MRR", hyb.FAQ.MRR, 0.66},
		{"FAQ MRR of users' phrasings", users[Hybrid].FAQ.MRR, 0.53},
		{"informal style", hyb.ByStyle["informal"], 0.54},
		{"synonym style", hyb.ByStyle["synonym"], 0.55},
		{"misspelling style", hyb.ByStyle["misspelling"], 0.52},
		{"paraphrase style", hyb.ByStyle["paraphrase"], 0.74},
		// The words' own strengths kept: no more than 0.02 below lexical,
		// but for typos, measured 0.022 below.
		{"keyword style against lexical", hyb.ByStyle["keywords"], lex.ByStyle["keywords"] - 0.02},
		{"partial style against lexical", hyb.ByStyle["partial"], lex.ByStyle["partial"] - 0.02},
		{"typo style against lexical", hyb.ByStyle["typo"], lex.ByStyle["typo"] - 0.03},
		// Combined, both sides do better than either alone.
		{"search MRR against the better side", hyb.Search.MRR, max(lex.Search.MRR, vec.Search.MRR) + 0.05},
		{"FAQ MRR against the better side", hyb.FAQ.MRR, max(lex.FAQ.MRR, vec.FAQ.MRR) + 0.05},
	} {
		if f.got < f.want {
			t.Errorf("%s: %.3f, below %.3f", f.name, f.got, f.want)
		}
	}
	// RAG answers more right than by words, and few wrong: a wrong
	// confident answer is worse than none. Measured 73 right and 9 wrong
	// of 219 (goal: 70% right, not reached).
	if n := hyb.RAG.Questions; hyb.RAG.Wrong*100 > 5*n {
		t.Errorf("RAG wrong %d of %d, over 5%%", hyb.RAG.Wrong, n)
	}
	if hyb.RAG.Right < 70 || hyb.RAG.Right <= lex.RAG.Right {
		t.Errorf("RAG right %d (by words %d), want at least 70 and more than by words", hyb.RAG.Right, lex.RAG.Right)
	}
}
