package searcheval

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

// evalDir holds the labelled evaluation set, beside the tests of the
// knowledge base that read it too.
const evalDir = "../../pkg/content/knowledge/testdata/eval"

// TestEvaluationSet holds search and FAQ ranking to the quality goal on
// the labelled set: a change that makes answers worse fails here.
// go run ./dev/searcheval prints the full report.
// The goal holds on the first originalQuestions questions; those after
// them are users' own phrasings (synonyms, informal wording,
// misspellings), which the search is not yet held to.
func TestEvaluationSet(t *testing.T) {
	b, qs := evalSet(t)
	all, err := Evaluate(context.Background(), b, qs, evalRecords(t)[content.KindIntent]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d questions: search MRR %.3f nDCG@5 %.3f; FAQ MRR %.3f nDCG@5 %.3f; suggestion hit rate@5 of users' word prefixes %.3f, of FAQ questions %.3f, of intent utterances %.3f",
		len(qs), all.Search.MRR, all.Search.NDCG5, all.FAQ.MRR, all.FAQ.NDCG5, all.UserSuggestions.Rate, all.FAQSuggestions.Rate, all.IntentSuggestions.Rate)
	ev, err := Evaluate(context.Background(), b, qs[:originalQuestions])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first %d: search MRR %.3f nDCG@5 %.3f; FAQ MRR %.3f nDCG@5 %.3f; suggestion hit rate@5 %.3f",
		originalQuestions, ev.Search.MRR, ev.Search.NDCG5, ev.FAQ.MRR, ev.FAQ.NDCG5, ev.SuggestionHitRate)
	const goal = 0.8
	if ev.Search.MRR < goal || ev.FAQ.MRR < goal {
		t.Errorf("MRR below %.1f: search %.3f, FAQ %.3f", goal, ev.Search.MRR, ev.FAQ.MRR)
	}
	// Suggestions find what a user types as written (the goal), and a
	// user's own wording no worse than measured when this was written.
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"FAQ questions as written", all.FAQSuggestions.Rate, 0.95},
		{"intent utterances as written", all.IntentSuggestions.Rate, 0.95},
		{"users' questions", all.UserSuggestions.Rate, 0.40},
		{"search MRR of all questions", all.Search.MRR, 0.70},
		{"FAQ MRR of all questions", all.FAQ.MRR, 0.43},
	} {
		if f.got < f.want {
			t.Errorf("%s: %.3f, below %.2f", f.name, f.got, f.want)
		}
	}
	// Every prefix is counted once, whatever it hits.
	if all.IntentSuggestions.Prefixes == 0 || all.FAQSuggestions.Prefixes == 0 || all.UserSuggestions.Prefixes == 0 {
		t.Errorf("no prefixes: users' %+v, FAQ %+v, intent %+v", all.UserSuggestions, all.FAQSuggestions, all.IntentSuggestions)
	}
	n := 0
	for _, h := range all.UserSuggestionsByStyle {
		n += h.Prefixes
	}
	if n != all.UserSuggestions.Prefixes {
		t.Errorf("users' prefixes by style add up to %d, all are %d", n, all.UserSuggestions.Prefixes)
	}
}

// TestWordNetHelps holds the related words of WordNet to their use: on
// the questions in users' own words, FAQ matching and suggestions find
// more with them than without, and the first questions rank no worse.
func TestWordNetHelps(t *testing.T) {
	byKind, qs := evalRecords(t), evalQuestions(t)
	with, err := Evaluate(context.Background(), evalBase(t, byKind, knowledge.Options{Lexicon: wordNet(t)}), qs[originalQuestions:])
	if err != nil {
		t.Fatal(err)
	}
	without, err := Evaluate(context.Background(), evalBase(t, byKind, knowledge.Options{}), qs[originalQuestions:])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("users' phrasings: FAQ MRR %.3f with WordNet, %.3f without; search MRR %.3f, %.3f; suggestions %.3f, %.3f",
		with.FAQ.MRR, without.FAQ.MRR, with.Search.MRR, without.Search.MRR, with.UserSuggestions.Rate, without.UserSuggestions.Rate)
	if with.FAQ.MRR <= without.FAQ.MRR || with.Search.MRR <= without.Search.MRR || with.UserSuggestions.Rate <= without.UserSuggestions.Rate {
		t.Errorf("WordNet does not help: FAQ MRR %.3f with, %.3f without; search %.3f, %.3f; suggestions %.3f, %.3f",
			with.FAQ.MRR, without.FAQ.MRR, with.Search.MRR, without.Search.MRR, with.UserSuggestions.Rate, without.UserSuggestions.Rate)
	}
	first, err := Evaluate(context.Background(), evalBase(t, byKind, knowledge.Options{Lexicon: wordNet(t)}), qs[:originalQuestions])
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Evaluate(context.Background(), evalBase(t, byKind, knowledge.Options{}), qs[:originalQuestions])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"keywords", "typo"} {
		if first.ByStyle[s] < plain.ByStyle[s] {
			t.Errorf("%s-style MRR falls with WordNet: %.3f, %.3f without", s, first.ByStyle[s], plain.ByStyle[s])
		}
	}
}

// originalQuestions is how many questions the set had before users'
// phrasings were added after them.
const originalQuestions = 120

// TestEvaluationLabels checks the labels: a relevant ID that names no
// document or FAQ of the corpus would make a question unanswerable.
func TestEvaluationLabels(t *testing.T) {
	byKind := evalRecords(t)
	ids := map[string]map[string]bool{"search": {}, "faq": {}}
	for kind, target := range map[content.Kind]string{content.KindDocument: "search", content.KindFAQ: "faq"} {
		for _, r := range byKind[kind] {
			ids[target][r.ID] = true
		}
	}
	styles := map[string]bool{"paraphrase": true, "typo": true, "partial": true, "keywords": true, "synonym": true, "informal": true, "misspelling": true}
	qs := evalQuestions(t)
	seen := map[string]bool{}
	for i, q := range qs {
		if ids[q.Target] == nil || !styles[q.Style] || len(q.Relevant) == 0 || seen[q.Question] {
			t.Errorf("question %d %q: target %q, style %q, %d relevant, repeated %v", i+1, q.Question, q.Target, q.Style, len(q.Relevant), seen[q.Question])
		}
		seen[q.Question] = true
		for _, id := range q.Relevant {
			if !ids[q.Target][id] {
				t.Errorf("question %d %q: relevant %q is no %s item of the corpus", i+1, q.Question, id, q.Target)
			}
		}
	}
	if added := len(qs) - originalQuestions; added < 80 {
		t.Errorf("%d questions after the first %d; the users' phrasings need at least 80", added, originalQuestions)
	}
}

func TestWordPrefixes(t *testing.T) {
	for _, tt := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"hi", nil},                   // one short word: nothing typed part way
		{"returns", []string{"retu"}}, // one long word: cut inside it
		{"open now", []string{"open"}},
		{"open tomorrow", []string{"open", "open tomo"}},
		{"where is my bike", []string{"where is", "where is my"}},
		{"how do i check my voucher balance", []string{"how do i check", "how do i check my vouc"}},
		{"can  I\treturn a bike?", []string{"can I return", "can I return a"}},
		{"do you sell gift cards", []string{"do you sell", "do you sell gift"}},
		{"do you sell vouchers", []string{"do you", "do you sell"}},
		{"my café délivery", []string{"my café", "my café déli"}}, // runes, not bytes
	} {
		if got := wordPrefixes(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("wordPrefixes(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestHit(t *testing.T) {
	faq := func(s string) knowledge.Suggestion {
		return knowledge.Suggestion{Suggestion: s, Type: knowledge.KindFAQ}
	}
	intent := func(s string) knowledge.Suggestion {
		return knowledge.Suggestion{Suggestion: s, Type: knowledge.KindIntent}
	}
	texts := []string{"Do your gift cards expire?", "How long is a gift card valid for?"}
	for _, tt := range []struct {
		name string
		sugs []knowledge.Suggestion
		kind string
		want bool
	}{
		{"none", nil, knowledge.KindFAQ, false},
		{"first", []knowledge.Suggestion{faq("do your gift cards expire?")}, knowledge.KindFAQ, true},
		{"fifth", []knowledge.Suggestion{faq("a"), faq("b"), faq("c"), faq("d"), faq("How long is a gift card valid for?")}, knowledge.KindFAQ, true},
		{"sixth", []knowledge.Suggestion{faq("a"), faq("b"), faq("c"), faq("d"), faq("e"), faq("Do your gift cards expire?")}, knowledge.KindFAQ, false},
		{"other kind", []knowledge.Suggestion{intent("Do your gift cards expire?")}, knowledge.KindFAQ, false},
		{"intent", []knowledge.Suggestion{faq("x"), intent("do your gift cards expire?")}, knowledge.KindIntent, true},
		{"another text", []knowledge.Suggestion{faq("Do your gift cards expire")}, knowledge.KindFAQ, false},
	} {
		if got := hit(tt.sugs, tt.kind, texts); got != tt.want {
			t.Errorf("%s: hit = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHitRate(t *testing.T) {
	for _, tt := range []struct {
		hits []bool
		want HitRate
	}{
		{nil, HitRate{}},
		{[]bool{true}, HitRate{1, 1, 1}},
		{[]bool{true, false, false, true}, HitRate{4, 2, 0.5}},
		{[]bool{false, false}, HitRate{2, 0, 0}},
	} {
		var h HitRate
		for _, x := range tt.hits {
			h.add(x)
		}
		if h != tt.want {
			t.Errorf("%v: %+v, want %+v", tt.hits, h, tt.want)
		}
	}
}

func TestRank(t *testing.T) {
	for _, tt := range []struct {
		ranked, relevant []string
		rr, ndcg         float64
	}{
		{[]string{"a", "b"}, []string{"a"}, 1, 1},
		{[]string{"x", "a"}, []string{"a"}, 0.5, 0.6309},
		{[]string{"x", "y"}, []string{"a"}, 0, 0},
		{[]string{"a", "x", "b"}, []string{"a", "b"}, 1, (1 + 0.5) / (1 + 0.6309)},
	} {
		rr, ndcg := rank(tt.ranked, tt.relevant)
		if rr != tt.rr || ndcg < tt.ndcg-0.001 || ndcg > tt.ndcg+0.001 {
			t.Errorf("rank(%v, %v) = %.4f, %.4f; want %.4f, %.4f", tt.ranked, tt.relevant, rr, ndcg, tt.rr, tt.ndcg)
		}
	}
}

func TestRAGFigures(t *testing.T) {
	faq := func(id string) knowledge.Source {
		return knowledge.Source{URL: "f/" + id, Kind: knowledge.KindFAQ, ID: id}
	}
	doc := func(id string) knowledge.Source {
		return knowledge.Source{URL: "d/" + id, Kind: knowledge.KindDocument, ID: id}
	}
	var f RAGFigures
	for _, tt := range []struct {
		q Question
		a knowledge.Answer
	}{
		{Question{Target: "faq", Relevant: []string{"x"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{faq("x")}}},            // right
		{Question{Target: "search", Relevant: []string{"d1", "d2"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{doc("d2")}}}, // right
		{Question{Target: "faq", Relevant: []string{"x"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{faq("y"), faq("x")}}},  // wrong: the first counts
		{Question{Target: "search", Relevant: []string{"d1"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{faq("d1")}}},       // other kind, whatever its id
		{Question{Target: "faq", Relevant: []string{"x"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{doc("x"), faq("x")}}},  // other kind
		{Question{Target: "faq", Relevant: []string{"x"}}, knowledge.Answer{Sources: []knowledge.Source{}}},                                     // abstained
		{Question{Target: "search", Relevant: []string{"d1"}}, knowledge.Answer{HasAnswer: true, Sources: []knowledge.Source{}}},                // no source: abstained
	} {
		f.add(tt.q, tt.a)
	}
	want := RAGFigures{Questions: 7, Right: 2, OtherKind: 2, Wrong: 1, Abstained: 2}
	if f != want {
		t.Errorf("figures %+v, want %+v", f, want)
	}
}

// evalSet builds the evaluation corpus's base and reads its labelled
// questions, checking the set's size.
func evalSet(t testing.TB) (*knowledge.Base, []Question) {
	t.Helper()
	byKind := evalRecords(t)
	if len(byKind[content.KindDocument]) < 300 || len(byKind[content.KindFAQ]) < 100 {
		t.Fatalf("the corpus has %d documents and %d FAQs; the set needs at least 300 and 100", len(byKind[content.KindDocument]), len(byKind[content.KindFAQ]))
	}
	return evalBase(t, byKind, knowledge.Options{Lexicon: wordNet(t)}), evalQuestions(t)
}

// evalBase builds the evaluation corpus's base as the api does.
func evalBase(t testing.TB, byKind map[content.Kind][]content.Record, o knowledge.Options) *knowledge.Base {
	t.Helper()
	b, err := knowledge.New(knowledge.Content{Documents: byKind[content.KindDocument], FAQs: byKind[content.KindFAQ], Intents: byKind[content.KindIntent], Entities: byKind[content.KindEntity]}, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wordNet loads the WordNet database the api reads by default.
func wordNet(t testing.TB) *lexicon.WordNet {
	t.Helper()
	wn, err := lexicon.Load(lexicon.DefaultDir)
	if err != nil {
		t.Fatalf("%v (install Debian's wordnet-base, as go run ./dev/test does)", err)
	}
	return wn
}

// evalRecords reads the evaluation corpus's records by kind.
func evalRecords(t testing.TB) map[content.Kind][]content.Record {
	t.Helper()
	f, err := os.Open(evalDir + "/content.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, err := bundle.Read(f, bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[content.Kind][]content.Record{}
	for _, r := range file.Bundle.Records {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	return byKind
}

// evalQuestions reads the labelled questions.
func evalQuestions(t testing.TB) []Question {
	t.Helper()
	qs, err := ReadQuestions(evalDir + "/questions.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 60 {
		t.Fatalf("%d labelled questions; the set needs at least 60", len(qs))
	}
	return qs
}
