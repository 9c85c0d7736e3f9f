package knowledge_test

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/searcheval"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// TestEstimatesWithEncoder: large content measures only the documents
// nearest by estimate. Made to do so on the evaluation content, choosing
// 60 of its 337 documents, with the built-in sentence encoder as the api
// runs it, the answers stay what measuring them all gave.
func TestEstimatesWithEncoder(t *testing.T) {
	dir := os.Getenv("ENCODER_DIR")
	if dir == "" {
		dir, _ = encoder.Locate()
	}
	enc, err := encoder.Load(dir)
	if err != nil {
		t.Fatalf("%v (go run ./dev/test installs the model, or point ENCODER_DIR at it)", err)
	}
	b := knowledge.EvalBase(t, knowledge.Options{
		Embedder:     embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: enc},
		QueryTimeout: time.Minute, // the race detector slows the encoder down
	})
	ctx := context.Background()
	if err := b.WaitSemantic(ctx); err != nil {
		t.Fatal(err)
	}
	qs, err := searcheval.ReadQuestions("testdata/eval/questions.json")
	if err != nil {
		t.Fatal(err)
	}
	all, err := searcheval.EvaluateBy(ctx, b, searcheval.Hybrid, qs)
	if err != nil {
		t.Fatal(err)
	}
	if err := knowledge.EstimateDocuments(b, 60); err != nil {
		t.Fatal(err)
	}
	est, err := searcheval.EvaluateBy(ctx, b, searcheval.Hybrid, qs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measuring 60 documents chosen by estimate: search MRR %.3f, FAQ %.3f, RAG %+v", est.Search.MRR, est.FAQ.MRR, est.RAG)
	if d := math.Abs(est.Search.MRR - all.Search.MRR); d > 0.005 {
		t.Errorf("search MRR %.3f measuring the documents chosen by estimate, %.3f measuring all", est.Search.MRR, all.Search.MRR)
	}
	if d := est.RAG.Right - all.RAG.Right; d < -1 || est.RAG.Wrong > all.RAG.Wrong+1 {
		t.Errorf("RAG %+v measuring the documents chosen by estimate, %+v measuring all", est.RAG, all.RAG)
	}
}
