package knowledge

import (
	"context"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/assistantcms/cms/internal/textcorpus"
	"github.com/assistantcms/cms/pkg/content"
)

// knowledgeBase10k is the evaluation corpus grown to 10,000 documents
// and 1,000 FAQs, as the knowledge suite of dev/apibench serves, with
// WordNet as the api reads it.
func knowledgeBase10k(b *testing.B) (*Base, []Question) {
	src, o := content10k(b)
	base, err := New(src, o)
	if err != nil {
		b.Fatal(err)
	}
	return base, evalQuestions(b)
}

func content10k(b *testing.B) (Content, Options) {
	byKind := evalRecords(b)
	docs, err := textcorpus.Grow(byKind[content.KindDocument], 10_000, "document", 1)
	if err != nil {
		b.Fatal(err)
	}
	faqs, err := textcorpus.Grow(byKind[content.KindFAQ], 1_000, "answer", 2)
	if err != nil {
		b.Fatal(err)
	}
	return Content{Documents: docs, FAQs: faqs, Intents: byKind[content.KindIntent]}, Options{Lexicon: wordNet(b)}
}

// BenchmarkBuild10k is the build of the base of 10,000 documents and
// 1,000 FAQs: what an app's first question after a change waits for.
func BenchmarkBuild10k(b *testing.B) {
	src, o := content10k(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := New(src, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch10k is one search and its answer's encoding, over the
// labelled search questions in turn.
func BenchmarkSearch10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	var questions []string
	for _, q := range qs {
		if q.Target == "search" {
			questions = append(questions, q.Question)
		}
	}
	var buf []byte
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		buf = base.Search(questions[i%len(questions)], "").AppendJSON(buf[:0])
	}
}

// BenchmarkSuggest10k is one suggestion for the first half of each
// labelled question in turn.
func BenchmarkSuggest10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	var prefixes []string
	for _, q := range qs {
		r := []rune(q.Question)
		prefixes = append(prefixes, string(r[:int(math.Ceil(float64(len(r))/2))]))
	}
	all := map[string]bool{KindIntent: true, KindFAQ: true, KindHistorical: true}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		base.Suggest(prefixes[i%len(prefixes)], all, nil, 5)
	}
}

// BenchmarkFAQs10k is one FAQ query of ten answers, total included, over
// the labelled questions in turn.
func BenchmarkFAQs10k(b *testing.B) {
	base, qs := knowledgeBase10k(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		base.FAQs(qs[i%len(qs)].Question, 10)
	}
}

// hashVectors is an Embedder stand-in of the Universal Sentence
// Encoder's shape: 512 dimensions, a fixed pseudo-random vector per text,
// and a window of 128 tokens estimated from words. Its vectors mean
// nothing; it is for measuring what ranking by them costs.
type hashVectors struct{}

func (hashVectors) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		rng := rand.New(rand.NewPCG(h.Sum64(), 1))
		v := make([]float32, 512)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out, nil
}

func (hashVectors) Tokens(text string) int { return wordTokens(text) }
func (hashVectors) Window() int            { return 128 }

// hybridBase10k is knowledgeBase10k embedded by hashVectors, and the
// labelled questions.
func hybridBase10k(b *testing.B) (*Base, []string) {
	src, o := content10k(b)
	o.Embedder = hashVectors{}
	base, err := New(src, o)
	if err != nil {
		b.Fatal(err)
	}
	if err := base.WaitSemantic(context.Background()); err != nil {
		b.Fatal(err)
	}
	var questions []string
	for _, q := range evalQuestions(b) {
		questions = append(questions, q.Question)
	}
	index, _ := base.sem.vectors()
	b.Logf("%d documents, %d vectors", base.docs.Len(), index.vecs.Len())
	return base, questions
}

// understood is question understood by base, failing b when it is not
// ranked by meaning. The stand-in embeds a question in microseconds, so
// what remains is the similarities a ranking reads.
func understood(b *testing.B, base *Base, question string) Query {
	q := base.Understand(context.Background(), question)
	if q.Fallback != nil {
		b.Fatal(q.Fallback)
	}
	return q
}

// BenchmarkHybridSearch10k is one search ranked by words and meaning,
// and its answer's encoding: what ranking by meaning adds to
// BenchmarkSearch10k, the model's embedding of the question aside.
func BenchmarkHybridSearch10k(b *testing.B) {
	base, questions := hybridBase10k(b)
	var buf []byte
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := understood(b, base, questions[i%len(questions)])
		buf = base.SearchQuery(q, "").AppendJSON(buf[:0])
		q.Release()
	}
}

// BenchmarkHybridFAQs10k is BenchmarkFAQs10k ranked by words and meaning.
func BenchmarkHybridFAQs10k(b *testing.B) {
	base, questions := hybridBase10k(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := understood(b, base, questions[i%len(questions)])
		base.FAQsQuery(q, 10)
		q.Release()
	}
}
