package knowledge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/embeddings"
)

// concepts is an Embedder stand-in whose vectors say which concepts a
// text names: one dimension per concept, 1 when one of its words is in
// the text, and a small constant dimension so that no text is a zero
// vector. Texts naming the same concepts mean the same; a text naming
// none is far from everything. It counts the texts it embeds.
type concepts struct {
	words [][]string // by concept

	mu    sync.Mutex
	texts []string
}

func (c *concepts) Embed(_ context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.texts = append(c.texts, texts...)
	c.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(c.words)+1)
		lower := strings.ToLower(t)
		for k, ws := range c.words {
			for _, w := range ws {
				if strings.Contains(lower, w) {
					v[k] = 1
				}
			}
		}
		v[len(c.words)] = 0.1
		out[i] = v
	}
	return out, nil
}

func (c *concepts) Model() string { return "concepts" }

func (c *concepts) embedded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.texts)
}

// bikeConcepts: brakes, chains, payment, returns, opening hours, and
// concepts no content names.
func bikeConcepts() *concepts {
	return &concepts{words: [][]string{
		{"brake", "stopper", "squeal", "scream"},
		{"chain", "drivetrain"},
		{"pay", "finance", "instal", "afford"},
		{"return", "refund", "send back", "bring back"},
		{"open", "hours", "closing"},
		{"weather"}, {"colour"}, {"music"}, {"food"}, {"travel"}, {"sport"},
	}}
}

// hybridBase builds a base of docs and FAQs embedded by emb.
func hybridBase(t *testing.T, emb Embedder, docs, faqs []content.Record) *Base {
	t.Helper()
	b, err := New(Content{Documents: docs, FAQs: faqs}, Options{Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitSemantic(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

var hybridDocs = []content.Record{
	rec(content.KindDocument, "brakes", `{"title":"Looking after disc brakes","uri":"u/brakes","document":"Disc brakes need their pads checked each month.\n\nA squeal usually means contaminated pads."}`),
	rec(content.KindDocument, "chain", `{"title":"Chain wear","uri":"u/chain","document":"Measure chain wear with a checker. Replace the chain at 0.5 percent, and look at the brake pads while you are at it."}`),
	rec(content.KindDocument, "cleaning", `{"title":"Cleaning your bike","uri":"u/clean","document":"Wash the frame with warm water. Rinse and dry the drivetrain, then oil the chain."}`),
}

var hybridFAQs = []content.Record{
	rec(content.KindFAQ, "finance", `{"name":"Finance","questions":["Can I pay in instalments?"],"answer":"Yes, 0% finance over 12 months.","url":"f/finance"}`),
	rec(content.KindFAQ, "returns", `{"name":"Returns","questions":["Can I return a bike?"],"answer":"Within 30 days, unused.","url":"f/returns"}`),
	rec(content.KindFAQ, "hours", `{"name":"Opening hours","questions":["When are you open?"],"answer":"Nine to six, every day.","url":"f/hours"}`),
}

// TestHybridRanking: a question whose words all match keeps its lexical
// answer although meaning prefers another; a question whose words match
// little is answered by meaning; documents and FAQs alike.
func TestHybridRanking(t *testing.T) {
	b := hybridBase(t, bikeConcepts(), hybridDocs, hybridFAQs)
	ctx := context.Background()
	for _, tt := range []struct {
		name, question string
		doc, faq       string // the expected first document title and FAQ name; "" when none is expected first
	}{
		// "cleaning" names the chain alone, as the question does; "chain
		// wear" names brakes too, so meaning prefers "cleaning", and the
		// words that all match keep "chain wear" first.
		{"every word matched: the lexical answer", "chain wear checker", "Chain wear", ""},
		{"words matched little: meaning", "my stoppers scream", "Looking after disc brakes", ""},
		{"an FAQ by meaning", "can I afford it over a year", "", "Finance"},
		{"an FAQ by words", "when are you open", "", "Opening hours"},
		{"an FAQ whose words are elsewhere: meaning", "send back my purchase", "", "Returns"},
	} {
		q := b.Understand(ctx, tt.question)
		if q.Fallback != nil {
			t.Fatal(q.Fallback)
		}
		if tt.doc != "" {
			docs := b.SearchQuery(q, "").Documents
			if len(docs) == 0 || docs[0].Title != tt.doc {
				t.Errorf("%s: %q found %v first, want %q", tt.name, tt.question, titles(docs), tt.doc)
			}
		}
		if tt.faq != "" {
			faqs := b.FAQsQuery(q, 3).FAQ
			if len(faqs) == 0 || faqs[0].Name != tt.faq {
				t.Errorf("%s: %q found FAQs %+v first, want %q", tt.name, tt.question, faqs, tt.faq)
			}
		}
	}
}

// TestReleasedQueries: a question's arrays, given back, serve the next
// question without carrying anything over, and giving them back twice
// does not hand them to two questions.
func TestReleasedQueries(t *testing.T) {
	b := hybridBase(t, bikeConcepts(), hybridDocs, hybridFAQs)
	ctx := context.Background()
	questions := []string{"my stoppers scream", "chain wear checker", "send back my purchase"}
	want := map[string][]string{}
	for _, question := range questions {
		want[question] = titles(b.SearchQuery(b.Understand(ctx, question), "").Documents) // never released
	}
	for range 3 {
		for _, question := range questions {
			q := b.Understand(ctx, question)
			if got := titles(b.SearchQuery(q, "").Documents); !slices.Equal(got, want[question]) {
				t.Errorf("%q after other questions released theirs: %v, want %v", question, got, want[question])
			}
			q.Release()
		}
	}
	q := b.Understand(ctx, questions[0])
	q.Release()
	q.Release()
	q1, q2 := b.Understand(ctx, questions[1]), b.Understand(ctx, questions[2])
	if q1.scratch == nil || q1.scratch == q2.scratch {
		t.Errorf("two questions share their arrays after one Query was released twice")
	}
}

func titles(docs []Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.Title)
	}
	return out
}

// TestDocumentsRankByBestPassage: a document longer than the model's
// window is embedded in passages; a question about its last passage finds
// it by meaning, and RAG answers with that passage.
func TestDocumentsRankByBestPassage(t *testing.T) {
	emb := bikeConcepts()
	var body []string
	for i := range 12 {
		body = append(body, fmt.Sprintf("Paragraph %d says nothing much about anything in particular at all.", i))
	}
	body = append(body, "Our workshop will refund a repair that fails within a month.")
	long := rec(content.KindDocument, "guarantee", fmt.Sprintf(`{"title":"Workshop guarantee","uri":"u/guarantee","document":%q}`, strings.Join(body, "\n\n")))
	b := hybridBase(t, counting{Embedder: emb, window: 40}, append([]content.Record{long}, hybridDocs...), nil)
	index, err := b.sem.vectors()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(index.docPassages(0)); n < 2 {
		t.Fatalf("the long document is %d passages; want several within the window", n)
	}
	for _, p := range index.docPassages(0) {
		if text := b.docs.Item(0).Doc.Body[p.start:p.end]; runes(text) > 40 {
			t.Errorf("passage over the window of 40: %q", text)
		}
	}
	ctx := context.Background()
	q := b.Understand(ctx, "money back if mended badly, refund?")
	if docs := b.SearchQuery(q, "").Documents; len(docs) == 0 || docs[0].Title != "Workshop guarantee" {
		t.Fatalf("found %v first, want the workshop guarantee", titles(docs))
	}
	a, _ := b.Answer(ctx, "money back if mended badly, refund?", "", nil, 0)
	if !a.HasAnswer || len(a.Sources) == 0 || a.Sources[0].URL != "u/guarantee" || !strings.Contains(a.Result, "refund a repair") {
		t.Errorf("answer %+v; want the guarantee's last passage", a)
	}
}

// TestPassagesEmbeddedOnce: a paragraph two documents share is embedded
// once, and a document's passages are its own text, without its title.
func TestPassagesEmbeddedOnce(t *testing.T) {
	emb := bikeConcepts()
	shared := "Call us on 0123 456 789 to book."
	docs := []content.Record{
		rec(content.KindDocument, "a", fmt.Sprintf(`{"title":"Brake service (1)","uri":"a","document":"Brakes bled while you wait.\n\n%s"}`, shared)),
		rec(content.KindDocument, "b", fmt.Sprintf(`{"title":"Chain service (2)","uri":"b","document":"Chains fitted while you wait.\n\n%s"}`, shared)),
	}
	hybridBase(t, counting{Embedder: emb, window: 40}, docs, nil)
	got := emb.embedded()
	seen := map[string]int{}
	for _, text := range got {
		seen[text]++
	}
	for text, n := range seen {
		if n > 1 {
			t.Errorf("%q embedded %d times", text, n)
		}
	}
	if seen[shared] != 1 {
		t.Errorf("the shared paragraph was embedded %d times, want once; embedded %q", seen[shared], got)
	}
}

// TestAnswerDecisions: RAG answers from an FAQ or document that stands
// out from the next and means enough like the question, and says when it
// cannot; without an embedder it answers by words as before.
func TestAnswerDecisions(t *testing.T) {
	ctx := context.Background()
	hybrid := hybridBase(t, bikeConcepts(), hybridDocs, hybridFAQs)
	// Two FAQs that mean the same: neither stands out.
	twins := hybridBase(t, bikeConcepts(), nil, []content.Record{
		rec(content.KindFAQ, "pay1", `{"name":"Paying","questions":["How can I pay?"],"answer":"By card.","url":"f/pay1"}`),
		rec(content.KindFAQ, "pay2", `{"name":"Finance","questions":["Can I pay monthly?"],"answer":"Yes.","url":"f/pay2"}`),
	})
	lexical, err := Build(hybridDocs, hybridFAQs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		b        *Base
		question string
		source   string // the first source's URL; "" for no answer
	}{
		{"an FAQ that means the same", hybrid, "can I afford it over a year", "f/finance"},
		{"a document that stands out", hybrid, "my stoppers scream", "u/brakes"},
		{"nothing near: no answer", hybrid, "what is the capital of France", ""},
		// Finance stands out, but it is one of seven things the question
		// names: too little alike to answer from.
		{"stands out, means too little: no answer", hybrid, "pay weather colour music food travel sport", ""},
		{"two FAQs alike: no answer", twins, "paying for it", ""},
		{"no embedder: words alone", lexical, "when are you open", "f/hours"},
		{"no embedder, words that match little: no answer", lexical, "my stoppers scream", ""},
	} {
		a, err := tt.b.Answer(ctx, tt.question, "", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(a.Sources) > 0 {
			got = a.Sources[0].URL
		}
		if got != tt.source || a.HasAnswer != (tt.source != "") || (a.HasAnswer && a.Result == "") || (!a.HasAnswer && len(a.Sources) != 0) {
			t.Errorf("%s: %q answered %+v; want first source %q", tt.name, tt.question, a, tt.source)
		}
	}
}

// TestBadInput: empty, blank, huge, binary and foreign questions get an
// answer of the usual shape, by words when meaning cannot help, and never
// a panic; a blank question is not embedded.
func TestBadInput(t *testing.T) {
	emb := bikeConcepts()
	b := hybridBase(t, emb, hybridDocs, hybridFAQs)
	ctx := context.Background()
	before := len(emb.embedded())
	for _, question := range []string{"", "   \n\t", strings.Repeat("chain ", 200_000), "\x00\x01\xff\xfe binary", "¿Dónde está mi pedido?", "我的订单在哪里", "😀😀😀", "\u202e\u200b"} {
		q := b.Understand(ctx, question)
		if q.Fallback != nil {
			t.Errorf("%.20q: fallback %v", question, q.Fallback)
		}
		res := b.SearchQuery(q, "")
		if res.Documents == nil || res.Suggested == nil {
			t.Errorf("%.20q: search answered nil lists: %+v", question, res)
		}
		if faqs := b.FAQsQuery(q, 5); faqs.FAQ == nil || faqs.Total < len(faqs.FAQ) {
			t.Errorf("%.20q: FAQs %+v", question, faqs)
		}
		a, err := b.Answer(ctx, question, "", nil, 0)
		if err != nil || a.Sources == nil || (!a.HasAnswer && a.Result == "") {
			t.Errorf("%.20q: answer %+v, %v", question, a, err)
		}
		b.Suggest(question, map[string]bool{KindFAQ: true}, nil, 5)
	}
	for _, text := range emb.embedded()[before:] {
		if strings.TrimSpace(text) == "" {
			t.Errorf("a blank question was embedded")
		}
		if len([]rune(text)) > maxEmbedRunes {
			t.Errorf("a question of %d runes was embedded whole; want at most %d", len([]rune(text)), maxEmbedRunes)
		}
	}
	// Nothing here means anything to the model, and the words match
	// nothing either: no answer.
	for _, question := range []string{"¿Dónde está mi pedido?", "我的订单在哪里"} {
		if a, _ := b.Answer(ctx, question, "", nil, 0); a.HasAnswer {
			t.Errorf("%q answered %+v; want none", question, a)
		}
	}
}

// TestHybridRankingFallsBack: an embedder of vectors of the wrong
// dimension for the question is a fallback to words, not a failure.
func TestHybridRankingFallsBack(t *testing.T) {
	b := hybridBase(t, bikeConcepts(), hybridDocs, hybridFAQs)
	b.sem.emb = shortVectors{}
	q := b.Understand(context.Background(), "chain wear")
	if q.Fallback == nil {
		t.Fatal("a question vector of another dimension must be a fallback")
	}
	if docs := b.SearchQuery(q, "").Documents; len(docs) == 0 || docs[0].Title != "Chain wear" {
		t.Errorf("fallback answers by words: %v", titles(docs))
	}
}

type shortVectors struct{}

func (shortVectors) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1}
	}
	return out, nil
}

var _ embeddings.Embedder = (*concepts)(nil)
