package knowledge

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/search"
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
}

const evalDepth = 10

// Evaluate runs the questions against b.
func (b *Base) Evaluate(qs []Question) (Evaluation, error) {
	ev := Evaluation{ByStyle: map[string]float64{}}
	styleCount := map[string]int{}
	hits, prefixes := 0, 0
	for _, q := range qs {
		var ranked []string
		var m *Metrics
		switch q.Target {
		case "search":
			for _, r := range b.docs.Search(q.Question, search.Options{Limit: evalDepth}) {
				ranked = append(ranked, r.Doc.ID)
			}
			m = &ev.Search
		case "faq":
			for _, r := range b.faqs.Search(q.Question, search.Options{Limit: evalDepth}) {
				ranked = append(ranked, r.Doc.Group)
			}
			m = &ev.FAQ
			// Suggestions for the question as it is being typed.
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
		default:
			return ev, fmt.Errorf("question %q: unknown target %q", q.Question, q.Target)
		}
		rr, ndcg := rank(ranked, q.Relevant)
		m.Questions++
		m.MRR += rr
		m.NDCG5 += ndcg
		if rr == 0 {
			m.Misses = append(m.Misses, q.Question)
		}
		ev.ByStyle[q.Style] += rr
		styleCount[q.Style]++
	}
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
	return ev, nil
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

// Grow makes n records of one kind from recs, for measuring speed at
// sizes beyond an evaluation corpus: the originals, then copies with new
// IDs whose text field's paragraphs are shuffled and joined by a
// paragraph of another record, and whose title, if any, is numbered. Every
// text is distinct, in the corpus's vocabulary. The same seed gives the
// same records.
func Grow(recs []content.Record, n int, textField string, seed uint64) ([]content.Record, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("no records to grow")
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	texts := make([]string, len(recs))
	docs := make([]map[string]any, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Doc, &docs[i]); err != nil {
			return nil, fmt.Errorf("%s %q: %w", r.Kind, r.ID, err)
		}
		texts[i], _ = docs[i][textField].(string)
	}
	out := make([]content.Record, 0, n)
	for i := range n {
		src := recs[i%len(recs)]
		if i < len(recs) {
			out = append(out, src)
			continue
		}
		round := i / len(recs)
		doc := maps.Clone(docs[i%len(recs)])
		id := fmt.Sprintf("%s-%d", src.ID, round)
		doc[src.Kind.IDField()] = id
		paras := strings.Split(texts[i%len(recs)], "\n\n")
		other := strings.Split(texts[rng.IntN(len(texts))], "\n\n")
		paras = append(paras, other[rng.IntN(len(other))])
		rng.Shuffle(len(paras), func(a, b int) { paras[a], paras[b] = paras[b], paras[a] })
		doc[textField] = strings.Join(paras, "\n\n")
		if t, ok := doc["title"].(string); ok {
			doc["title"] = fmt.Sprintf("%s (%d)", t, round)
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", src.Kind, id, err)
		}
		r := src
		r.ID, r.Doc = id, raw
		out = append(out, r)
	}
	return out, nil
}
