// Package searcheval measures the search, FAQ, RAG and suggestion quality
// of a knowledge base on labelled questions: the figures go run
// ./dev/searcheval reports, and the tests hold the ranking to.
package searcheval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// Question is a labelled question of an evaluation set.
type Question struct {
	Question string `json:"question"`
	// Target is "search" (Relevant names documents) or "faq" (FAQs).
	Target   string   `json:"target"`
	Relevant []string `json:"relevant"`
	Style    string   `json:"style"`
}

// ReadQuestions reads a JSON array of labelled questions.
func ReadQuestions(path string) ([]Question, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []Question
	if err := json.Unmarshal(raw, &qs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}

// Metrics are ranking figures over a set of questions.
type Metrics struct {
	Questions int
	// MRR is the mean reciprocal rank of the first relevant item in the
	// top 10 (0 when none is there).
	MRR float64
	// NDCG5 is the mean normalised discounted cumulative gain of the top
	// 5, with every relevant item gaining 1.
	NDCG5 float64
	// Misses are the questions with no relevant item in the top 10.
	Misses []string
}

// Evaluation is the report of Evaluate.
type Evaluation struct {
	Search, FAQ Metrics
	// ByStyle is the MRR of search and FAQ questions together, per style.
	ByStyle map[string]float64
	// SuggestionHitRate is, over prefixes of the FAQ questions (half and
	// three quarters of their length), the share whose top 5 suggestions
	// hold a question of a relevant FAQ.
	SuggestionHitRate  float64
	SuggestionPrefixes int
	// UserSuggestions is over word prefixes (wordPrefixes) of the
	// questions whose target is an FAQ: a hit is a question of a relevant
	// FAQ among the top 5 suggestions. UserSuggestionsByStyle splits it by
	// the questions' style.
	UserSuggestions        HitRate
	UserSuggestionsByStyle map[string]HitRate
	// RAG is how /cms/rag answers the questions (without a generator).
	RAG RAGFigures
	// Reciprocal is each question's reciprocal rank (see Metrics.MRR), in
	// the order given, for comparing rankings question by question.
	Reciprocal []float64
	// FAQSuggestions and IntentSuggestions are over word prefixes of the
	// FAQs' questions and of the intents' utterances as written: a hit is
	// a question of the same FAQ, or an utterance of the same intent, among
	// the top 5 suggestions. IntentSuggestions is empty when no intents
	// are given.
	FAQSuggestions, IntentSuggestions HitRate
}

// RAGFigures count how retrieval-augmented answers fare: Right when the
// first source is a relevant item of the question's target kind (FAQ or
// document), OtherKind when it is of the other kind (the labels name one
// kind; such an answer is not labelled right or wrong), Wrong when it is
// an item of the target's kind that is not relevant, Abstained when the
// answer says it has none.
type RAGFigures struct {
	Questions, Right, OtherKind, Wrong, Abstained int
}

func (f *RAGFigures) add(q Question, a knowledge.Answer) {
	f.Questions++
	switch {
	case !a.HasAnswer || len(a.Sources) == 0:
		f.Abstained++
	case (q.Target == "faq") != (a.Sources[0].Kind == knowledge.KindFAQ):
		f.OtherKind++
	case slices.Contains(q.Relevant, a.Sources[0].ID):
		f.Right++
	default:
		f.Wrong++
	}
}

// Ranking is what an evaluation ranks by.
type Ranking int

const (
	// Hybrid ranks as the api does: by words, and by meaning as well when
	// an embedder is configured.
	Hybrid Ranking = iota
	// Lexical ranks by words alone.
	Lexical
	// Vectors ranks by meaning alone; it needs an embedder, and has no
	// RAG figures (answers are given on combined scores).
	Vectors
)

// HitRate is the share of typed prefixes whose suggestions hold what the
// user was typing towards.
type HitRate struct {
	Prefixes, Hits int
	Rate           float64
}

func (h *HitRate) add(hit bool) {
	h.Prefixes++
	if hit {
		h.Hits++
	}
	h.Rate = float64(h.Hits) / float64(h.Prefixes)
}

// suggestDepth is how many suggestions a user sees while typing.
const suggestDepth = 5

// evalDepth is how far down a ranking the metrics look.
const evalDepth = 10

// Evaluate runs the questions against b, and the suggestions against
// prefixes of the questions, of b's FAQ questions and of the utterance
// patterns of intents (the records b was built from; the intent figures
// stay empty without them). With semantic retrieval, questions are
// ranked as SearchQuery and FAQsQuery rank them.
func Evaluate(ctx context.Context, b *knowledge.Base, qs []Question, intents ...content.Record) (Evaluation, error) {
	return EvaluateBy(ctx, b, Hybrid, qs, intents...)
}

// EvaluateBy is Evaluate ranking by words, meaning, or both; the
// suggestion figures are the same whatever it ranks by.
func EvaluateBy(ctx context.Context, b *knowledge.Base, by Ranking, qs []Question, intents ...content.Record) (Evaluation, error) {
	e := newEvaluator(b)
	ev := Evaluation{ByStyle: map[string]float64{}, UserSuggestionsByStyle: map[string]HitRate{}}
	styleCount := map[string]int{}
	hits, prefixes := 0, 0
	for _, q := range qs {
		var ranked []string
		var m *Metrics
		uq, err := understood(ctx, b, q.Question, by)
		if err != nil {
			return ev, err
		}
		if by != Vectors {
			a, _ := b.AnswerQuery(ctx, uq, "", nil, 0)
			ev.RAG.add(q, a)
		}
		switch q.Target {
		case "search":
			docs := b.SearchQuery(uq, "").Documents
			for _, d := range docs[:min(len(docs), evalDepth)] {
				ranked = append(ranked, d.ID)
			}
			m = &ev.Search
		case "faq":
			for _, f := range b.FAQsQuery(uq, evalDepth).FAQ {
				ranked = append(ranked, f.ID)
			}
			m = &ev.FAQ
			h, n := e.typedSuggestions(&ev, q)
			hits, prefixes = hits+h, prefixes+n
		default:
			return ev, fmt.Errorf("question %q: unknown target %q", q.Question, q.Target)
		}
		uq.Release()
		rr, ndcg := rank(ranked, q.Relevant)
		ev.Reciprocal = append(ev.Reciprocal, rr)
		m.Questions++
		m.MRR += rr
		m.NDCG5 += ndcg
		if rr == 0 {
			m.Misses = append(m.Misses, q.Question)
		}
		ev.ByStyle[q.Style] += rr
		styleCount[q.Style]++
	}
	ev.average(styleCount, hits, prefixes)
	err := e.writtenSuggestions(&ev, intents)
	return ev, err
}

// evaluator scores the suggestions of a base.
type evaluator struct {
	b    *knowledge.Base
	faqs []knowledge.FAQ
	// questions are each FAQ's questions, by its ID.
	questions map[string][]string
}

func newEvaluator(b *knowledge.Base) *evaluator {
	e := &evaluator{b: b, faqs: b.FAQList(), questions: map[string][]string{}}
	for _, f := range e.faqs {
		e.questions[f.ID] = f.Questions
	}
	return e
}

// typedSuggestions scores the suggestions for FAQ question q as it is
// being typed: into ev's per-word figures, and as the hits among the
// prefixes it returns.
func (e *evaluator) typedSuggestions(ev *Evaluation, q Question) (hits, prefixes int) {
	for _, frac := range []float64{0.5, 0.75} {
		n := int(math.Ceil(frac * float64(utf8.RuneCountInString(q.Question))))
		prefix := string([]rune(q.Question)[:n])
		prefixes++
		for _, s := range e.suggestWhileTyping(prefix) {
			if s.Type == knowledge.KindFAQ && e.isQuestionOf(s.Suggestion, q.Relevant) {
				hits++
				break
			}
		}
	}
	// The same as a user types it, word by word.
	var texts []string
	for _, id := range q.Relevant {
		texts = append(texts, e.questions[id]...)
	}
	byStyle := ev.UserSuggestionsByStyle[q.Style]
	for _, p := range wordPrefixes(q.Question) {
		h := hit(e.suggestWhileTyping(p), knowledge.KindFAQ, texts)
		ev.UserSuggestions.add(h)
		byStyle.add(h)
	}
	ev.UserSuggestionsByStyle[q.Style] = byStyle
	return hits, prefixes
}

// average turns the sums over the questions into means and rates.
func (ev *Evaluation) average(styleCount map[string]int, hits, prefixes int) {
	for _, m := range []*Metrics{&ev.Search, &ev.FAQ} {
		if m.Questions > 0 {
			m.MRR /= float64(m.Questions)
			m.NDCG5 /= float64(m.Questions)
		}
	}
	for s, n := range styleCount {
		ev.ByStyle[s] /= float64(n)
	}
	if prefixes > 0 {
		ev.SuggestionHitRate = float64(hits) / float64(prefixes)
	}
	ev.SuggestionPrefixes = prefixes
}

// writtenSuggestions scores the suggestions for FAQ questions and
// utterances as written, as a user who means one of them types it.
func (e *evaluator) writtenSuggestions(ev *Evaluation, intents []content.Record) error {
	for _, f := range e.faqs {
		for _, q := range f.Questions {
			for _, p := range wordPrefixes(q) {
				ev.FAQSuggestions.add(hit(e.suggestWhileTyping(p), knowledge.KindFAQ, f.Questions))
			}
		}
	}
	for _, r := range intents {
		var f struct {
			UtterancePatterns []string `json:"utterancePatterns"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return fmt.Errorf("intent %q: %w", r.ID, err)
		}
		// Suggestions show patterns without their slots, as the base
		// indexes them.
		var plain []string
		for _, u := range f.UtterancePatterns {
			if p := knowledge.PlainPattern(u); p != "" {
				plain = append(plain, p)
			}
		}
		for _, u := range plain {
			for _, p := range wordPrefixes(u) {
				ev.IntentSuggestions.add(hit(e.suggestWhileTyping(p), knowledge.KindIntent, plain))
			}
		}
	}
	return nil
}

// understood is b.Understand for ranking by: it fails rather than fall
// back, as figures of lexical ranks must not pass for those of combined
// ones.
func understood(ctx context.Context, b *knowledge.Base, question string, by Ranking) (knowledge.Query, error) {
	if by == Lexical {
		// Without the question's vector, a Query is ranked by its words.
		return knowledge.Query{Text: question}, nil
	}
	if by == Vectors && !b.Semantic() {
		return knowledge.Query{}, errors.New("ranking by meaning alone needs an embedder")
	}
	q := b.Understand(ctx, question)
	if q.Fallback != nil {
		return q, fmt.Errorf("question %q: semantic retrieval failed: %w", question, q.Fallback)
	}
	if by == Vectors {
		q = q.ByMeaning()
	}
	return q, nil
}

// suggestWhileTyping is what the suggestion box offers for a prefix: FAQ
// questions and intent patterns, no history.
func (e *evaluator) suggestWhileTyping(prefix string) []knowledge.Suggestion {
	return e.b.Suggest(prefix, map[string]bool{knowledge.KindFAQ: true, knowledge.KindIntent: true}, nil, suggestDepth)
}

// longWord is the length in runes from which a user is likely to pick a
// suggestion before finishing the word.
const longWord = 6

// wordPrefixes cuts text as it stands part way through typing: its first
// half of the words and its first three quarters (rounded up), the latter
// ending inside its last word, at half of it rounded up, when that word is
// long. A prefix is never the whole text, and the two are returned once
// when they are the same.
func wordPrefixes(text string) []string {
	words := strings.Fields(text)
	n := len(words)
	var out []string
	if k := min((n+1)/2, n-1); k > 0 {
		out = append(out, strings.Join(words[:k], " "))
	}
	k := (3*n + 3) / 4
	if k == 0 {
		return out
	}
	p := slices.Clone(words[:k])
	if last := []rune(p[k-1]); len(last) >= longWord {
		p[k-1] = string(last[:(len(last)+1)/2])
	} else if k == n {
		p = p[:k-1]
	}
	if len(p) > 0 {
		if s := strings.Join(p, " "); len(out) == 0 || s != out[0] {
			out = append(out, s)
		}
	}
	return out
}

// hit reports whether one of the first suggestDepth suggestions is of
// kind and one of texts, in any case.
func hit(sugs []knowledge.Suggestion, kind string, texts []string) bool {
	for _, s := range sugs[:min(len(sugs), suggestDepth)] {
		if s.Type != kind {
			continue
		}
		for _, t := range texts {
			if strings.EqualFold(s.Suggestion, t) {
				return true
			}
		}
	}
	return false
}

// rank computes the reciprocal rank and nDCG@5 of a ranking.
func rank(ranked, relevant []string) (rr, ndcg float64) {
	rel := map[string]bool{}
	for _, r := range relevant {
		rel[r] = true
	}
	var dcg, ideal float64
	for i, id := range ranked {
		if !rel[id] {
			continue
		}
		if rr == 0 {
			rr = 1 / float64(i+1)
		}
		if i < 5 {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := 0; i < min(5, len(rel)); i++ {
		ideal += 1 / math.Log2(float64(i+2))
	}
	if ideal > 0 {
		ndcg = dcg / ideal
	}
	return rr, ndcg
}

// isQuestionOf reports whether text is a question of one of the FAQs
// ids, in any case.
func (e *evaluator) isQuestionOf(text string, ids []string) bool {
	for _, id := range ids {
		for _, q := range e.questions[id] {
			if strings.EqualFold(q, text) {
				return true
			}
		}
	}
	return false
}
