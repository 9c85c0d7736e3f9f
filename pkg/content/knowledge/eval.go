package knowledge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/content"
)

// Question is a labelled question of an evaluation set.
type Question struct {
	Question string `json:"question"`
	// Target is "search" (Relevant names documents) or "faq" (FAQs).
	Target   string   `json:"target"`
	Relevant []string `json:"relevant"`
	Style    string   `json:"style"`
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

func (f *RAGFigures) add(q Question, a Answer) {
	f.Questions++
	switch {
	case !a.HasAnswer || len(a.Sources) == 0:
		f.Abstained++
	case (q.Target == "faq") != (a.Sources[0].kind == KindFAQ):
		f.OtherKind++
	case slices.Contains(q.Relevant, a.Sources[0].id):
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

const evalDepth = 10

// Evaluate runs the questions against b, and the suggestions against
// prefixes of the questions, of b's FAQ questions and of the utterance
// patterns of intents (the records b was built from; the intent figures
// stay empty without them). With semantic retrieval, questions are
// ranked as SearchQuery and FAQsQuery rank them.
func (b *Base) Evaluate(ctx context.Context, qs []Question, intents ...content.Record) (Evaluation, error) {
	return b.EvaluateBy(ctx, Hybrid, qs, intents...)
}

// EvaluateBy is Evaluate ranking by words, meaning, or both; the
// suggestion figures are the same whatever it ranks by.
func (b *Base) EvaluateBy(ctx context.Context, by Ranking, qs []Question, intents ...content.Record) (Evaluation, error) {
	ev := Evaluation{ByStyle: map[string]float64{}, UserSuggestionsByStyle: map[string]HitRate{}}
	styleCount := map[string]int{}
	hits, prefixes := 0, 0
	for _, q := range qs {
		var ranked []string
		var m *Metrics
		uq, err := b.understood(ctx, q.Question, by)
		if err != nil {
			return ev, err
		}
		if by != Vectors {
			a, _ := b.answer(ctx, uq, "", nil, 0)
			ev.RAG.add(q, a)
		}
		switch q.Target {
		case "search":
			for _, r := range b.docResults(uq, "", evalDepth) {
				ranked = append(ranked, r.Doc.ID)
			}
			m = &ev.Search
		case "faq":
			found, _ := b.faqResults(uq, evalDepth)
			for _, h := range found {
				ranked = append(ranked, h.group)
			}
			m = &ev.FAQ
			h, n := b.typedSuggestions(&ev, q)
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
	err := b.writtenSuggestions(&ev, intents)
	return ev, err
}

// typedSuggestions scores the suggestions for FAQ question q as it is
// being typed: into ev's per-word figures, and as the hits among the
// prefixes it returns.
func (b *Base) typedSuggestions(ev *Evaluation, q Question) (hits, prefixes int) {
	for _, frac := range []float64{0.5, 0.75} {
		n := int(math.Ceil(frac * float64(utf8.RuneCountInString(q.Question))))
		prefix := string([]rune(q.Question)[:n])
		prefixes++
		for _, s := range b.Suggest(prefix, map[string]bool{KindFAQ: true, KindIntent: true}, nil, 5) {
			if s.Type == KindFAQ && b.isQuestionOf(s.Suggestion, q.Relevant) {
				hits++
				break
			}
		}
	}
	// The same as a user types it, word by word.
	var texts []string
	for _, id := range q.Relevant {
		texts = append(texts, b.faqList[id].Questions...)
	}
	byStyle := ev.UserSuggestionsByStyle[q.Style]
	for _, p := range wordPrefixes(q.Question) {
		h := hit(b.suggestWhileTyping(p), KindFAQ, texts)
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
func (b *Base) writtenSuggestions(ev *Evaluation, intents []content.Record) error {
	for _, id := range slices.Sorted(maps.Keys(b.faqList)) {
		qs := b.faqList[id].Questions
		for _, q := range qs {
			for _, p := range wordPrefixes(q) {
				ev.FAQSuggestions.add(hit(b.suggestWhileTyping(p), KindFAQ, qs))
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
		// Suggestions show patterns without their slots, as Build indexes
		// them.
		var plain []string
		for _, u := range f.UtterancePatterns {
			if p := plainPattern(u); p != "" {
				plain = append(plain, p)
			}
		}
		for _, u := range plain {
			for _, p := range wordPrefixes(u) {
				ev.IntentSuggestions.add(hit(b.suggestWhileTyping(p), KindIntent, plain))
			}
		}
	}
	return nil
}

// understood is Understand for ranking by: it fails rather than fall
// back, as figures of lexical ranks must not pass for those of combined
// ones.
func (b *Base) understood(ctx context.Context, question string, by Ranking) (Query, error) {
	if by == Lexical {
		return Query{Text: question, mode: rankLexical}, nil
	}
	if by == Vectors && b.sem == nil {
		return Query{}, fmt.Errorf("ranking by meaning alone needs an embedder")
	}
	q := b.Understand(ctx, question)
	if q.Fallback != nil {
		return q, fmt.Errorf("question %q: semantic retrieval failed: %w", question, q.Fallback)
	}
	if by == Vectors {
		q.mode = rankVector
	}
	return q, nil
}

// suggestWhileTyping is what the suggestion box offers for a prefix: FAQ
// questions and intent patterns, no history.
func (b *Base) suggestWhileTyping(prefix string) []Suggestion {
	return b.Suggest(prefix, map[string]bool{KindFAQ: true, KindIntent: true}, nil, suggestDepth)
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
func hit(sugs []Suggestion, kind string, texts []string) bool {
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

func (b *Base) isQuestionOf(text string, ids []string) bool {
	for _, id := range ids {
		for _, q := range b.faqList[id].Questions {
			if strings.EqualFold(q, text) {
				return true
			}
		}
	}
	return false
}
