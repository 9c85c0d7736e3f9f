// Command searcheval measures search, FAQ, RAG and suggestion quality on
// the labelled evaluation set:
//
//	go run ./dev/searcheval [-content FILE] [-questions FILE] [-misses] [-wordnet DIR] [-first N]
//	    [-encoder DIR|off] [-embeddings-url URL -embeddings-model M [-embeddings-timeout D]]
//	    [-embeddings-min-similarity S]
//
// It builds the knowledge base of the bundle's app exactly as the api
// does and reports MRR and nDCG@5 for search and for FAQ matching, in all
// and for the first N questions and the rest apart, and MRR per question
// style. With the built-in sentence encoder (the api's default, read
// from -encoder) or an embeddings endpoint in its place, it ranks three
// ways on the same base and prints them side by side: by words alone (lexical), by meaning
// alone (vectors alone: documents by their lead and best passage, FAQs by
// their best question and answer), and by both as the api does (hybrid,
// see embeddings.Combine); with -encoder off, lexical only.
//
// RAG figures are for /cms/rag without a generator, over every labelled
// question: right when the answer's first source is a relevant item of
// the question's target kind, other kind when it is an FAQ for a question
// labelled with documents or the reverse (the labels name one kind, so
// such an answer is neither), wrong when it is an item of the target's
// kind that is not relevant, abstained when it says it has no answer.
//
// Suggestion hit rates at 5 are for prefixes of the labelled questions
// whose target is an FAQ, cut by characters and by words (also per
// style), and for word prefixes of the FAQ questions and intent
// utterances as written.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/assistantcms/cms/internal/searcheval"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

func main() {
	contentPath := flag.String("content", "pkg/content/knowledge/testdata/eval/content.json", "content bundle of one app")
	questionsPath := flag.String("questions", "pkg/content/knowledge/testdata/eval/questions.json", "labelled questions")
	misses := flag.Bool("misses", false, "list the questions with no relevant result in the top 10")
	wordnet := flag.String("wordnet", lexicon.DefaultDir, "WordNet database `dir` for related words; empty for none")
	model, _ := encoder.Locate()
	encDir := flag.String("encoder", model, "the sentence encoder's model `dir` (the api's default: where it is installed); \"off\" for lexical ranking only")
	embURL := flag.String("embeddings-url", "", "OpenAI-compatible API root (…/v1) of an embedding model to use in the encoder's place")
	embModel := flag.String("embeddings-model", "", "embedding model name")
	embKey := flag.String("embeddings-api-key", os.Getenv("EMBEDDINGS_API_KEY"), "bearer key for the embeddings endpoint")
	embMinSim := flag.Float64("embeddings-min-similarity", 0, "least similarity for an item found by meaning alone (0: the nearest, however far)")
	embTimeout := flag.Duration("embeddings-timeout", 2*time.Minute, "per request to the embeddings endpoint (a model on a CPU may take seconds per batch)")
	first := flag.Int("first", 120, "also report the first `N` questions (the set before users' phrasings were added) and the rest apart; 0 for not")
	flag.Parse()
	var o knowledge.Options
	if *wordnet != "" {
		wn, err := lexicon.Load(*wordnet)
		if err != nil {
			fmt.Fprintln(os.Stderr, "searcheval:", err)
			os.Exit(1)
		}
		o.Lexicon = wn
	}
	var emb embeddings.Embedder
	switch {
	case *embURL != "":
		client, err := embeddings.New(embeddings.Config{URL: *embURL, Model: *embModel, APIKey: *embKey, Timeout: *embTimeout}, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "searcheval:", err)
			os.Exit(1)
		}
		emb = client
	case *encDir != "off":
		enc, err := encoder.Load(*encDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "searcheval:", err)
			os.Exit(1)
		}
		emb = enc
	}
	if emb != nil {
		o.Embedder = embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: emb}
		o.QueryTimeout = time.Minute
		o.MinSimilarity = *embMinSim
	}
	if err := run(*contentPath, *questionsPath, *misses, *first, o); err != nil {
		fmt.Fprintln(os.Stderr, "searcheval:", err)
		os.Exit(1)
	}
}

func run(contentPath, questionsPath string, misses bool, first int, o knowledge.Options) error {
	b, docs, faqs, intents, err := Load(contentPath, o)
	if err != nil {
		return err
	}
	if err := b.WaitSemantic(context.Background()); err != nil {
		return err
	}
	qs, err := searcheval.ReadQuestions(questionsPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ev, err := searcheval.Evaluate(ctx, b, qs, intents...)
	if err != nil {
		return err
	}
	// Each ranking on its own, on the same base, for comparison.
	type column struct {
		name       string
		by         searcheval.Ranking
		all, parts []searcheval.Evaluation
	}
	cols := []*column{{name: "lexical", by: searcheval.Lexical}}
	if b.Semantic() {
		cols = append(cols, &column{name: "vectors alone", by: searcheval.Vectors}, &column{name: "hybrid", by: searcheval.Hybrid})
	}
	var parts []string
	var partQs [][]searcheval.Question
	if first > 0 && first < len(qs) {
		parts = []string{fmt.Sprintf("questions 1-%d", first), fmt.Sprintf("questions %d-%d", first+1, len(qs))}
		partQs = [][]searcheval.Question{qs[:first], qs[first:]}
	}
	for _, c := range cols {
		e := ev
		if c.by != searcheval.Hybrid || !b.Semantic() {
			if e, err = searcheval.EvaluateBy(ctx, b, c.by, qs); err != nil {
				return err
			}
		}
		c.all = []searcheval.Evaluation{e}
		for _, pq := range partQs {
			pe, err := searcheval.EvaluateBy(ctx, b, c.by, pq)
			if err != nil {
				return err
			}
			c.parts = append(c.parts, pe)
		}
	}
	fmt.Printf("%d documents, %d FAQs, %d labelled questions.\n\nMRR (nDCG@5) by what ranks:\n\n", docs, faqs, len(qs))
	header := "| | questions |"
	rule := "|---|---:|"
	for _, c := range cols {
		header += " " + c.name + " |"
		rule += "---:|"
	}
	fmt.Println(header)
	fmt.Println(rule)
	row := func(name string, n int, cell func(c *column) string) {
		line := fmt.Sprintf("| %s | %d |", name, n)
		for _, c := range cols {
			line += " " + cell(c) + " |"
		}
		fmt.Println(line)
	}
	metric := func(m searcheval.Metrics) string { return fmt.Sprintf("%.3f (%.3f)", m.MRR, m.NDCG5) }
	row("search", ev.Search.Questions, func(c *column) string { return metric(c.all[0].Search) })
	row("FAQ", ev.FAQ.Questions, func(c *column) string { return metric(c.all[0].FAQ) })
	for i, name := range parts {
		row("search, "+name, cols[0].parts[i].Search.Questions, func(c *column) string { return metric(c.parts[i].Search) })
		row("FAQ, "+name, cols[0].parts[i].FAQ.Questions, func(c *column) string { return metric(c.parts[i].FAQ) })
	}
	styles := slices.Sorted(maps.Keys(ev.ByStyle))
	count := map[string]int{}
	for _, q := range qs {
		count[q.Style]++
	}
	for _, s := range styles {
		row("style "+s, count[s], func(c *column) string { return fmt.Sprintf("%.3f", c.all[0].ByStyle[s]) })
	}

	if len(cols) == 3 {
		// Whether the combination keeps what each side finds: of the
		// questions one side ranks right first, how many hybrid does.
		lex, vec, hyb := cols[0].all[0].Reciprocal, cols[1].all[0].Reciprocal, cols[2].all[0].Reciprocal
		var nl, nv, ne, kl, kv, ke, neither int
		for i := range hyb {
			l, v, h := lex[i] == 1, vec[i] == 1, hyb[i] == 1
			if l {
				nl++
				kl += b2i(h)
			}
			if v {
				nv++
				kv += b2i(h)
			}
			if l || v {
				ne++
				ke += b2i(h)
			} else {
				neither += b2i(h)
			}
		}
		fmt.Printf("\nRanked right first: lexical %d questions, hybrid keeps %d; vectors alone %d, hybrid keeps %d; either %d, hybrid %d, and %d that neither does.\n",
			nl, kl, nv, kv, ne, ke, neither)
	}

	fmt.Println("\nRetrieval-augmented answers (/cms/rag, extractive): right when the first source is a relevant item of the")
	fmt.Println("question's target kind; other kind when it is an FAQ for a document question or the reverse (unlabelled);")
	fmt.Println("wrong when it is an item of the target's kind that is not relevant.")
	fmt.Println()
	fmt.Println("| ranking | questions | right | other kind | wrong | abstained |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, c := range cols {
		r := c.all[0].RAG
		if r.Questions == 0 {
			continue
		}
		pc := func(n int) string { return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(r.Questions)) }
		fmt.Printf("| %s | %d | %s | %s | %s | %s |\n", c.name, r.Questions, pc(r.Right), pc(r.OtherKind), pc(r.Wrong), pc(r.Abstained))
	}

	fmt.Printf("\nSuggestion hit rate@5 over %d prefixes (half and three quarters of the characters) of the labelled FAQ questions: %.3f\n", ev.SuggestionPrefixes, ev.SuggestionHitRate)
	fmt.Println("\nSuggestion hit rate@5 over word prefixes (half, and three quarters ending mid-word when the word is long):")
	fmt.Println()
	fmt.Println("| typed towards | prefixes | hits | hit rate@5 |")
	fmt.Println("|---|---:|---:|---:|")
	hits := func(name string, h searcheval.HitRate) {
		fmt.Printf("| %s | %d | %d | %.3f |\n", name, h.Prefixes, h.Hits, h.Rate)
	}
	hits("labelled questions with an FAQ target", ev.UserSuggestions)
	for _, s := range slices.Sorted(maps.Keys(ev.UserSuggestionsByStyle)) {
		hits("of them, style "+s, ev.UserSuggestionsByStyle[s])
	}
	hits("FAQ questions as written", ev.FAQSuggestions)
	if ev.IntentSuggestions.Prefixes > 0 {
		hits("intent utterances as written", ev.IntentSuggestions)
	} else {
		fmt.Println("\nThe content has no intent utterances.")
	}
	if misses {
		for _, m := range append(ev.Search.Misses, ev.FAQ.Misses...) {
			fmt.Println("miss:", m)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Load builds the knowledge base of the bundle's records (entities give
// synonyms) and returns it with the numbers of documents and FAQs and the
// intent records.
func Load(path string, o knowledge.Options) (*knowledge.Base, int, int, []content.Record, error) {
	file, err := bundle.ReadFile(path)
	if err != nil {
		return nil, 0, 0, nil, err
	}
	var lists [4][]content.Record
	for _, r := range file.Bundle.Records {
		switch r.Kind {
		case content.KindDocument:
			lists[0] = append(lists[0], r)
		case content.KindFAQ:
			lists[1] = append(lists[1], r)
		case content.KindIntent:
			lists[2] = append(lists[2], r)
		case content.KindEntity:
			lists[3] = append(lists[3], r)
		}
	}
	b, err := knowledge.New(knowledge.Content{Documents: lists[0], FAQs: lists[1], Intents: lists[2], Entities: lists[3]}, o)
	return b, len(lists[0]), len(lists[1]), lists[2], err
}
