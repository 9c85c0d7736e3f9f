package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"
)

// The goals of the knowledge suite.
const (
	goalSearchP99      = 20 * time.Millisecond
	goalSuggestionsP99 = 5 * time.Millisecond
	knowledgeDocs      = 10_000
	knowledgeFAQs      = 1_000
	evalContent        = "pkg/knowledge/testdata/eval/content.json"
	evalQuestions      = "pkg/knowledge/testdata/eval/questions.json"
)

type evalBundle struct {
	Organizations []map[string]any `json:"organizations"`
	Apps          []map[string]any `json:"apps"`
	Intents       []map[string]any `json:"intents"`
	FAQs          []map[string]any `json:"faqs"`
	Documents     []map[string]any `json:"documents"`
}

// grow makes n items from the corpus's: the originals, then copies with
// new IDs whose paragraphs are shuffled and mixed with another item's, so
// that the index holds n distinct texts of the corpus's vocabulary.
func grow(items []map[string]any, n int, idKey, textKey string, rng *rand.Rand) []map[string]any {
	out := make([]map[string]any, 0, n)
	for i := range n {
		src := items[i%len(items)]
		item := map[string]any{}
		for k, v := range src {
			item[k] = v
		}
		if i >= len(items) {
			round := i / len(items)
			item[idKey] = fmt.Sprintf("%v-%d", src[idKey], round)
			if text, ok := src[textKey].(string); ok {
				paras := strings.Split(text, "\n\n")
				other, _ := items[rng.IntN(len(items))][textKey].(string)
				if op := strings.Split(other, "\n\n"); len(op) > 0 {
					paras = append(paras, op[rng.IntN(len(op))])
				}
				rng.Shuffle(len(paras), func(a, b int) { paras[a], paras[b] = paras[b], paras[a] })
				item[textKey] = strings.Join(paras, "\n\n")
			}
			if t, ok := item["title"].(string); ok {
				item["title"] = fmt.Sprintf("%s (%d)", t, round)
			}
		}
		out = append(out, item)
	}
	return out
}

func knowledgeSuite() suite {
	var questions []struct {
		Question string `json:"question"`
		Target   string `json:"target"`
	}
	return suite{
		concurrency: 16,
		app:         "eval-app",
		bundle: func() ([]byte, error) {
			raw, err := os.ReadFile(evalContent)
			if err != nil {
				return nil, err
			}
			var b evalBundle
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, fmt.Errorf("%s: %w", evalContent, err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			b.Documents = grow(b.Documents, knowledgeDocs, "id", "document", rng)
			b.FAQs = grow(b.FAQs, knowledgeFAQs, "id", "answer", rng)
			if qraw, err := os.ReadFile(evalQuestions); err != nil {
				return nil, err
			} else if err := json.Unmarshal(qraw, &questions); err != nil {
				return nil, fmt.Errorf("%s: %w", evalQuestions, err)
			}
			return json.Marshal(b)
		},
		endpoints: func(apiURL string) ([]endpoint, error) {
			var search, faq, suggest []string
			for _, q := range questions {
				esc := url.QueryEscape(q.Question)
				switch q.Target {
				case "search":
					search = append(search, apiURL+"/cms/search?question="+esc)
				case "faq":
					faq = append(faq, apiURL+"/cms/faq/query?question="+esc)
				}
				r := []rune(q.Question)
				prefix := string(r[:int(math.Ceil(float64(len(r))/2))])
				suggest = append(suggest, apiURL+"/cms/suggestions?key=eval-web&queryText="+url.QueryEscape(prefix))
			}
			if len(search) == 0 || len(faq) == 0 {
				return nil, fmt.Errorf("%s has no search or FAQ questions", evalQuestions)
			}
			return []endpoint{
				{name: fmt.Sprintf("GET /cms/search (%d documents)", knowledgeDocs), urls: search},
				{name: fmt.Sprintf("GET /cms/faq/query (%d FAQs)", knowledgeFAQs), urls: faq},
				{name: "GET /cms/suggestions", urls: suggest},
			}, nil
		},
		goals: func(name string) (float64, time.Duration) {
			if strings.Contains(name, "suggestions") {
				return 0, goalSuggestionsP99
			}
			return 0, goalSearchP99
		},
	}
}
