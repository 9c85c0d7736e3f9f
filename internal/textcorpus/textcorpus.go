// Package textcorpus grows a labelled content corpus to the sizes speed
// is measured at: the benchmarks of the knowledge base and the api's
// benchmark of search, FAQ and RAG answers.
package textcorpus

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"

	"github.com/assistantcms/cms/pkg/content"
)

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
