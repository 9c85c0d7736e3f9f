// Command searcheval measures search, FAQ and suggestion quality on the
// labelled evaluation set:
//
//	go run ./dev/searcheval [-content FILE] [-questions FILE] [-misses] [-wordnet DIR]
//	    [-embeddings-url URL -embeddings-model M]
//
// It builds the knowledge base of the bundle's app exactly as the api
// does and reports MRR and nDCG@5 for search and for FAQ matching, MRR
// per question style, and suggestion hit rates at 5: for prefixes of the
// labelled questions whose target is an FAQ, cut by characters and by
// words (also per style), and for word prefixes of the FAQ questions and
// intent utterances as written.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

func main() {
	contentPath := flag.String("content", "pkg/content/knowledge/testdata/eval/content.json", "content bundle of one app")
	questionsPath := flag.String("questions", "pkg/content/knowledge/testdata/eval/questions.json", "labelled questions")
	misses := flag.Bool("misses", false, "list the questions with no relevant result in the top 10")
	wordnet := flag.String("wordnet", lexicon.DefaultDir, "WordNet database `dir` for related words; empty for none")
	embURL := flag.String("embeddings-url", "", "OpenAI-compatible API root (…/v1) to rank with lexical and vector ranks fused; empty for lexical only")
	embModel := flag.String("embeddings-model", "", "embedding model name")
	embKey := flag.String("embeddings-api-key", os.Getenv("EMBEDDINGS_API_KEY"), "bearer key for the embeddings endpoint")
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
	if *embURL != "" {
		client, err := embeddings.New(embeddings.Config{URL: *embURL, Model: *embModel, APIKey: *embKey}, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "searcheval:", err)
			os.Exit(1)
		}
		o.Embedder = embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: client}
		o.QueryTimeout = time.Minute
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
	raw, err := os.ReadFile(questionsPath)
	if err != nil {
		return err
	}
	var qs []knowledge.Question
	if err := json.Unmarshal(raw, &qs); err != nil {
		return fmt.Errorf("%s: %w", questionsPath, err)
	}
	ev, err := b.Evaluate(context.Background(), qs, intents...)
	if err != nil {
		return err
	}
	fmt.Printf("%d documents, %d FAQs, %d labelled questions.\n\n", docs, faqs, len(qs))
	fmt.Println("| | questions | MRR | nDCG@5 |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| search | %d | %.3f | %.3f |\n", ev.Search.Questions, ev.Search.MRR, ev.Search.NDCG5)
	fmt.Printf("| FAQ | %d | %.3f | %.3f |\n", ev.FAQ.Questions, ev.FAQ.MRR, ev.FAQ.NDCG5)
	if first > 0 && first < len(qs) {
		for _, part := range []struct {
			name string
			qs   []knowledge.Question
		}{
			{fmt.Sprintf("questions 1-%d", first), qs[:first]},
			{fmt.Sprintf("questions %d-%d", first+1, len(qs)), qs[first:]},
		} {
			pe, err := b.Evaluate(context.Background(), part.qs)
			if err != nil {
				return err
			}
			fmt.Printf("| search, %s | %d | %.3f | %.3f |\n", part.name, pe.Search.Questions, pe.Search.MRR, pe.Search.NDCG5)
			fmt.Printf("| FAQ, %s | %d | %.3f | %.3f |\n", part.name, pe.FAQ.Questions, pe.FAQ.MRR, pe.FAQ.NDCG5)
		}
	}
	fmt.Printf("\nMRR by question style:")
	styles := make([]string, 0, len(ev.ByStyle))
	for s := range ev.ByStyle {
		styles = append(styles, s)
	}
	slices.Sort(styles)
	for _, s := range styles {
		fmt.Printf(" %s %.3f;", s, ev.ByStyle[s])
	}
	fmt.Printf("\nSuggestion hit rate@5 over %d prefixes (half and three quarters of the characters) of the labelled FAQ questions: %.3f\n", ev.SuggestionPrefixes, ev.SuggestionHitRate)
	fmt.Println("\nSuggestion hit rate@5 over word prefixes (half, and three quarters ending mid-word when the word is long):")
	fmt.Println()
	fmt.Println("| typed towards | prefixes | hits | hit rate@5 |")
	fmt.Println("|---|---:|---:|---:|")
	row := func(name string, h knowledge.HitRate) {
		fmt.Printf("| %s | %d | %d | %.3f |\n", name, h.Prefixes, h.Hits, h.Rate)
	}
	row("labelled questions with an FAQ target", ev.UserSuggestions)
	styles = styles[:0]
	for s := range ev.UserSuggestionsByStyle {
		styles = append(styles, s)
	}
	slices.Sort(styles)
	for _, s := range styles {
		row("of them, style "+s, ev.UserSuggestionsByStyle[s])
	}
	row("FAQ questions as written", ev.FAQSuggestions)
	if ev.IntentSuggestions.Prefixes > 0 {
		row("intent utterances as written", ev.IntentSuggestions)
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
	b, err := knowledge.New(knowledge.Sources{Documents: lists[0], FAQs: lists[1], Intents: lists[2], Entities: lists[3]}, o)
	return b, len(lists[0]), len(lists[1]), lists[2], err
}
