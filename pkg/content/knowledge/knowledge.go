// Package knowledge answers questions from an app's content: ranked
// search over its knowledge-base documents with answer passages, FAQ
// matching over every question variant, retrieval-augmented answers, and
// autocomplete suggestions. It builds on package search and knows the
// shapes the reference client reads.
package knowledge

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/search"
)

// Base is the searchable content of one app at one revision. It is
// immutable and safe for concurrent use.
type Base struct {
	docs *search.Index
	// docHeads are each document's title, uri and document fields as
	// JSON, by index number.
	docHeads []string
	faqs     *search.Index
	faqList  map[string]faq
	suggest  *search.Suggester
	// intents index the intents' utterance patterns, grouped by intent,
	// for suggestions found by meaning.
	intents *search.Index
	// groupOf names the FAQ or intent each suggestion text (NormalText)
	// belongs to, by kind: a suggestion list shows each once.
	groupOf map[[2]string]string
	// sem is semantic retrieval, nil when no embedder is configured.
	sem *semantic
	// built is the memory the build allocated for words (see Bytes).
	built int64
}

type faq struct {
	ID, Name, Answer, URL, Created string
	Questions                      []string
}

type docFields struct {
	Title    string `json:"title"`
	URI      string `json:"uri"`
	Document string `json:"document"`
	Location string `json:"location"`
}

type faqFields struct {
	Name      string   `json:"name"`
	Questions []string `json:"questions"`
	Answer    string   `json:"answer"`
	URL       string   `json:"url"`
	Created   string   `json:"created"`
}

// Content is the records of one app a Base is built from: its documents,
// FAQs, intents and entities.
type Content struct {
	Documents, FAQs, Intents, Entities []content.Record
}

// Options are what a Base knows beyond the app's content.
type Options struct {
	// Lexicon expands query words with related words of general English
	// (WordNet); nil for none.
	Lexicon search.Lexicon
	// Embedder, when set, embeds the documents and FAQ questions when the
	// base is built (in the background) and each question when asked;
	// search and FAQ matching then fuse lexical and vector ranks.
	Embedder Embedder
	// ContentEmbedder, when set, embeds the content in Embedder's place,
	// which then embeds only questions: a store of the content's vectors
	// that outlives the process goes here, and questions never reach it.
	// It must give the vectors Embedder would.
	ContentEmbedder Embedder
	// QueryTimeout bounds the embedding of a question; zero means
	// DefaultQueryTimeout.
	QueryTimeout time.Duration
	// MinSimilarity is the least cosine similarity to the question an
	// item needs to be ranked by meaning; zero ranks the nearest whatever
	// they are. What is unrelated depends on the model.
	MinSimilarity float64
	// Log receives how embedding the content went; nil for none.
	Log *slog.Logger
	// App is the app the base is of. An Embedder that is also an
	// AppEmbedder embeds the app's texts apart from every other app's.
	App string
	// Turn, when set, runs the background work of embedding the content
	// that needs this process's cores alone (cutting it into passages,
	// making its vectors) when it is the app's turn, on one core: a
	// caller that shares its cores among tenants passes its gate, so that
	// an app loading its vectors takes turns with everyone's rankings
	// instead of taking every core beside them. Nil runs it at once.
	Turn func(ctx context.Context, work func()) error
	// EmbedInTurns runs the content's embedding in Turn too, a part at a
	// time: for a ContentEmbedder (or Embedder) that works on this
	// process's cores or reads a local store, never for one that waits
	// on the network, as a turn is held while it works. An encoder that
	// spreads a part over every core still does so within its turn:
	// turns bound how many parts are embedded at once.
	EmbedInTurns bool
}

// Build indexes an app's documents, FAQs and intents.
func Build(docs, faqs, intents []content.Record) (*Base, error) {
	return New(Content{Documents: docs, FAQs: faqs, Intents: intents}, Options{})
}

// New indexes an app's content. Query words are expanded with synonyms
// found in the app's own content (entity values and their synonyms, and
// words used interchangeably across one FAQ's questions or one intent's
// utterance patterns), then with related words of o.Lexicon.
func New(src Content, o Options) (*Base, error) {
	docs, faqs, intents := src.Documents, src.FAQs, src.Intents
	b := &Base{faqList: make(map[string]faq, len(faqs)), groupOf: map[[2]string]string{}}
	synonyms, err := synonymSets(faqs, intents, src.Entities)
	if err != nil {
		return nil, err
	}
	cfg := search.Config{Synonyms: synonyms, Lexicon: o.Lexicon}
	sdocs := make([]search.Doc, 0, len(docs))
	for _, r := range docs {
		var f docFields
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("document %q: %w", r.ID, err)
		}
		sdocs = append(sdocs, search.Doc{ID: r.ID, Title: f.Title, Body: f.Document, URI: f.URI, Location: f.Location})
	}
	b.docHeads = make([]string, len(sdocs))
	for i, d := range sdocs {
		b.docHeads[i] = string(appendHead(nil, d.Title, d.URI, d.Body))
	}

	var variants []search.Doc
	var cands []search.Candidate
	for i, r := range faqs {
		var f faqFields
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("FAQ %q: %w", r.ID, err)
		}
		created := f.Created
		if created == "" {
			created = r.CreatedAt.UTC().Format(content.TimeLayout)
		}
		b.faqList[r.ID] = (faq{ID: r.ID, Name: f.Name, Answer: f.Answer, URL: f.URL, Created: created, Questions: f.Questions})
		// Each question variant is an item of its own; the answer helps a
		// little, through the body.
		for j, q := range f.Questions {
			variants = append(variants, search.Doc{ID: fmt.Sprintf("%d/%d", i, j), Group: r.ID, Title: q, Body: f.Name + ". " + f.Answer})
			cands = append(cands, search.Candidate{Text: q, Kind: KindFAQ, Answer: f.Answer})
			if k := [2]string{KindFAQ, search.NormalText(q)}; b.groupOf[k] == "" {
				b.groupOf[k] = r.ID
			}
		}
	}

	seen := map[string]bool{}
	var utterances []search.Doc
	for _, r := range intents {
		var f struct {
			UtterancePatterns []string `json:"utterancePatterns"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("intent %q: %w", r.ID, err)
		}
		for _, p := range f.UtterancePatterns {
			text := PlainPattern(p)
			if text != "" && !seen[strings.ToLower(text)] {
				seen[strings.ToLower(text)] = true
				cands = append(cands, search.Candidate{Text: text, Kind: KindIntent})
				b.groupOf[[2]string{KindIntent, search.NormalText(text)}] = r.ID
				utterances = append(utterances, search.Doc{ID: fmt.Sprintf("%d", len(utterances)), Group: r.ID, Title: text})
			}
		}
	}
	// The content is read; its vectors are planned and loaded in the
	// background while the words are indexed.
	if o.Embedder != nil {
		b.sem = newSemantic(o, sdocs, variants, func(group string) string { return b.faqList[group].Answer })
	}
	b.docs = search.BuildWith(sdocs, cfg)
	b.faqs = search.BuildWith(variants, cfg)
	b.suggest = search.NewSuggester(cands)
	b.intents = search.BuildWith(utterances, cfg)
	b.built = b.lexicalBytes()
	return b, nil
}

// minAlternativeSources is how many FAQs or intents must use two words
// for one another before they count as synonyms: one FAQ's "pay by paypal"
// and "pay by klarna" name different things.
const minAlternativeSources = 2

// synonymSets are the sets of words the app's content uses for one
// another. Entity synonyms are declared, so they count at once; words
// swapped across question variants or utterance patterns count only when
// several FAQs or intents swap them.
func synonymSets(faqs, intents, entities []content.Record) ([][]string, error) {
	var sets [][]string
	sources := map[[2]string]int{}
	var pairs [][2]string // in first-seen order, for a deterministic build
	addAlternatives := func(texts []string) {
		seen := map[[2]string]bool{}
		for _, alt := range search.Alternatives(texts) {
			k := [2]string{min(alt[0], alt[1]), max(alt[0], alt[1])}
			if seen[k] {
				continue
			}
			seen[k] = true
			if sources[k] == 0 {
				pairs = append(pairs, k)
			}
			sources[k]++
		}
	}
	for _, r := range entities {
		var f struct {
			Values []struct {
				Name     string   `json:"name"`
				Synonyms []string `json:"synonyms"`
			} `json:"values"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("entity %q: %w", r.ID, err)
		}
		for _, v := range f.Values {
			if len(v.Synonyms) > 0 {
				sets = append(sets, append([]string{v.Name}, v.Synonyms...))
			}
		}
	}
	for _, r := range faqs {
		var f struct {
			Questions []string `json:"questions"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("FAQ %q: %w", r.ID, err)
		}
		addAlternatives(f.Questions)
	}
	for _, r := range intents {
		var f struct {
			UtterancePatterns []string `json:"utterancePatterns"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("intent %q: %w", r.ID, err)
		}
		texts := make([]string, 0, len(f.UtterancePatterns))
		for _, p := range f.UtterancePatterns {
			texts = append(texts, PlainPattern(p))
		}
		addAlternatives(texts)
	}
	for _, k := range pairs {
		if sources[k] >= minAlternativeSources {
			sets = append(sets, []string{k[0], k[1]})
		}
	}
	return sets, nil
}

var slotRef = regexp.MustCompile(`\$\{[^}]*\}|\{[^}]*\}`)

// PlainPattern is an utterance pattern without its slot references: the
// words a user types before filling a slot in, as suggestions show the
// pattern, for a caller that shows or matches patterns as they do.
func PlainPattern(p string) string {
	return strings.Join(strings.Fields(slotRef.ReplaceAllString(p, " ")), " ")
}

// Highlight is a matched word in a document, in UTF-16 code units.
type Highlight struct {
	BeginOffset int  `json:"beginOffset"`
	EndOffset   int  `json:"endOffset"`
	TopAnswer   bool `json:"topAnswer,omitempty"`
}

// Document is a KnowledgeBaseDocument.
type Document struct {
	Title      string            `json:"title,omitempty"`
	URI        string            `json:"uri,omitempty"`
	Document   string            `json:"document"`
	Highlights []Highlight       `json:"highlights"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// ID is the document's record ID, for a caller that relates a result
	// to the content it came from (feedback on a result, which documents
	// answer most); the response body leaves it out.
	ID string `json:"-"`
	// head is Title, URI and Document as JSON, when known.
	head string
}

// Suggested is a KnowledgeBaseSuggested: a passage with its best
// sentence as the top answer.
type Suggested struct {
	Document
	TopAnswer       string  `json:"topAnswer,omitempty"`
	MatchConfidence float64 `json:"matchConfidence"`
}

// SearchResult is the body of GET /cms/search.
type SearchResult struct {
	Documents []Document  `json:"documents"`
	Suggested []Suggested `json:"suggested"`
}

// Limits of the answers.
const (
	maxDocuments  = 10
	maxSuggested  = 3
	maxHighlights = 50
)

// Search ranks the app's documents for question, lexically. With
// location, only documents whose location is exactly that are searched.
func (b *Base) Search(question, location string) SearchResult {
	return b.SearchQuery(Query{Text: question}, location)
}

// SearchQuery is Search for a question understood (see Understand): with
// its vector, lexical scores and similarities are combined (see
// embeddings.Combine).
func (b *Base) SearchQuery(q Query, location string) SearchResult {
	question := q.Text
	res := b.docResults(q, location, maxDocuments)
	out := SearchResult{Documents: []Document{}, Suggested: []Suggested{}}
	passages := b.docs.Passages(question, res[:min(len(res), maxSuggested)], maxSuggested)
	top := map[int]search.Span{} // best passage's sentence per result, in body offsets
	if len(passages) > 0 {
		p := passages[0]
		top[p.Result.Index] = search.Span{Start: p.Start + p.Sentence.Start, End: p.Start + p.Sentence.End}
	}
	for _, r := range res {
		d := b.document(r)
		if s, ok := top[r.Index]; ok {
			for i, h := range d.Highlights {
				d.Highlights[i].TopAnswer = h.BeginOffset >= s.Start && h.EndOffset <= s.End
			}
		}
		out.Documents = append(out.Documents, d)
	}
	for _, p := range passages {
		d := Document{Title: p.Result.Doc.Title, URI: p.Result.Doc.URI, Document: p.Text, Highlights: b.highlights(p.Result, p.Start, p.End), ID: p.Result.Doc.ID}
		for i, h := range d.Highlights {
			d.Highlights[i].TopAnswer = h.BeginOffset >= p.Sentence.Start && h.EndOffset <= p.Sentence.End
		}
		out.Suggested = append(out.Suggested, Suggested{Document: d, TopAnswer: utf16Slice(p.Text, p.Sentence), MatchConfidence: round(p.Confidence)})
	}
	return out
}

// docResults ranks the documents for q, at most limit.
func (b *Base) docResults(q Query, location string, limit int) []search.Result {
	ranked := b.docRanking(q, location, limit)
	out := make([]search.Result, len(ranked))
	for i, r := range ranked {
		out[i] = r.Result
	}
	return out
}

// rankedDoc is a document ranked for a question: with its score (lexical,
// or combined with its similarity) and its passage nearest in meaning
// (-1 when ranked lexically).
type rankedDoc struct {
	search.Result
	score, similarity float64
	passage           int
}

// docRanking ranks the documents for q, at most limit.
func (b *Base) docRanking(q Query, location string, limit int) []rankedDoc {
	if !q.semantic() {
		var out []rankedDoc
		for _, r := range b.docs.Search(q.Text, search.Options{Limit: limit, Location: location}) {
			out = append(out, rankedDoc{Result: r, score: r.Score, passage: -1})
		}
		return out
	}
	var keep func(int) bool
	if location != "" {
		keep = func(i int) bool { return b.docs.Item(i).Doc.Location == location }
	}
	ds := q.docSimilarities(keep)
	near := nearest(ds.candidates, max(limit, fuseDepth), func(i int) float64 { s, _ := ds.at(i); return s }, keep, q.floor())
	if q.mode == rankVector {
		out := make([]rankedDoc, 0, min(limit, len(near)))
		for _, i := range near[:min(limit, len(near))] {
			s, best := ds.at(i)
			out = append(out, rankedDoc{Result: b.docs.Item(i), score: s, similarity: s, passage: best})
		}
		return out
	}
	lexical := b.docs.Search(q.Text, search.Options{Limit: fuseDepth, Location: location})
	found := make(map[int]search.Result, len(lexical))
	ev := make([]embeddings.Evidence, 0, len(lexical)+len(near))
	for _, r := range lexical {
		found[r.Index] = r
		s, _ := ds.at(r.Index)
		ev = append(ev, embeddings.Evidence{Item: r.Index, Lexical: r.Score / lexical[0].Score, Similarity: finiteOr0(s)})
	}
	for _, i := range near {
		if _, ok := found[i]; !ok {
			s, _ := ds.at(i)
			ev = append(ev, embeddings.Evidence{Item: i, Similarity: s})
		}
	}
	var out []rankedDoc
	for _, f := range embeddings.Combine(ev, lexicalConfidence(lexical), embeddings.DefaultWeighting, limit) {
		r, ok := found[f.Item]
		if !ok {
			r = b.docs.Item(f.Item) // found by meaning alone: nothing to highlight
		}
		s, best := ds.at(f.Item)
		out = append(out, rankedDoc{Result: r, score: f.Score, similarity: finiteOr0(s), passage: best})
	}
	return out
}

// lexicalConfidence is how much of the question the lexical top matched
// (0 when nothing matched).
func lexicalConfidence(lexical []search.Result) float64 {
	if len(lexical) == 0 {
		return 0
	}
	return lexical[0].Confidence
}

// finiteOr0 is f, or 0 for an item with nothing to mean.
func finiteOr0(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	return f
}

func (b *Base) document(r search.Result) Document {
	d := r.Doc
	out := Document{Title: d.Title, URI: d.URI, Document: d.Body, Highlights: b.highlights(r, 0, math.MaxInt32), ID: d.ID, head: b.docHeads[r.Index]}
	if d.Location != "" {
		out.Attributes = map[string]string{"location": d.Location}
	}
	return out
}

func (b *Base) highlights(r search.Result, from, to int) []Highlight {
	spans := b.docs.HighlightsIn(r, from, to)
	out := make([]Highlight, 0, min(len(spans), maxHighlights))
	for _, s := range spans[:min(len(spans), maxHighlights)] {
		out = append(out, Highlight{BeginOffset: s.Start, EndOffset: s.End})
	}
	return out
}

// utf16Slice cuts text by UTF-16 offsets; offsets inside a character or
// out of range give "".
func utf16Slice(text string, s search.Span) string {
	if s.Start < 0 || s.Start > s.End {
		return ""
	}
	from, to, u := -1, -1, 0
	for i, r := range text {
		if u == s.Start {
			from = i
		}
		if u == s.End {
			to = i
			break
		}
		u += utf16.RuneLen(r)
	}
	if u == s.End && to < 0 {
		to = len(text)
	}
	if u == s.Start && from < 0 {
		from = len(text)
	}
	if from < 0 || to < 0 {
		return ""
	}
	return strings.TrimSpace(text[from:to])
}

func round(f float64) float64 { return math.Round(f*1000) / 1000 }

// FAQ is a StudioFAQ with its score.
type FAQ struct {
	Created   string   `json:"created"`
	Questions []string `json:"questions"`
	Name      string   `json:"name"`
	Answer    string   `json:"answer"`
	URL       string   `json:"url,omitempty"`
	Score     float64  `json:"_score"`
	// ID is the FAQ's record ID, for a caller that relates a match to
	// the content it came from; the response body leaves it out.
	ID string `json:"-"`
}

// FAQResult is the body of GET /cms/faq/query.
type FAQResult struct {
	Total int   `json:"total"`
	FAQ   []FAQ `json:"faq"`
}

// FAQs matches question against every question variant of every FAQ and
// answers the best limit of them. Total counts every FAQ that matched,
// however many limit leaves out, as a client paging or saying "3 of 40"
// needs.
func (b *Base) FAQs(question string, limit int) FAQResult {
	return b.FAQsQuery(Query{Text: question}, limit)
}

// FAQsQuery is FAQs for a question understood (see Understand): with its
// vector, lexical scores and similarities are combined (see
// embeddings.Combine); each FAQ's _score is then its combined score, and
// Total also counts the FAQs among the answer that only their meaning
// found.
func (b *Base) FAQsQuery(q Query, limit int) FAQResult {
	hits, total := b.faqResults(q, max(limit, 1))
	out := FAQResult{Total: total, FAQ: []FAQ{}}
	for _, h := range hits[:min(len(hits), max(limit, 0))] {
		f := b.faqList[h.group]
		out.FAQ = append(out.FAQ, FAQ{Created: f.Created, Questions: f.Questions, Name: f.Name, Answer: f.Answer, URL: f.URL, Score: h.score, ID: f.ID})
	}
	return out
}

// FAQList is every FAQ of the base in order of ID, as FAQs answers them
// but with no score: for a caller that shows the FAQs as a whole or
// checks texts against them, such as which FAQ a suggested question is
// one of.
func (b *Base) FAQList() []FAQ {
	out := make([]FAQ, 0, len(b.faqList))
	for _, id := range slices.Sorted(maps.Keys(b.faqList)) {
		f := b.faqList[id]
		out = append(out, FAQ{Created: f.Created, Questions: f.Questions, Name: f.Name, Answer: f.Answer, URL: f.URL, ID: f.ID})
	}
	return out
}

// faqHit is an FAQ found for a question, with its score and, when
// ranked by meaning, its similarity.
type faqHit struct {
	group             string
	score, similarity float64
}

// faqResults ranks the FAQs for q, at most limit, and counts those that
// matched.
func (b *Base) faqResults(q Query, limit int) ([]faqHit, int) {
	var out []faqHit
	if !q.semantic() {
		res, total := b.faqs.SearchCount(q.Text, search.Options{Limit: limit})
		for _, r := range res {
			out = append(out, faqHit{group: r.Doc.Group, score: round(r.Score)})
		}
		return out, total
	}
	sims, best := q.faqSimilarities()
	near := nearest(all(len(sims)), max(limit, fuseDepth), func(g int) float64 { return sims[g] }, nil, q.floor())
	group := func(i int) string { return b.faqs.Item(i).Doc.Group }
	if q.mode == rankVector {
		for _, g := range near[:min(limit, len(near))] {
			out = append(out, faqHit{group: group(best[g]), score: round(sims[g]), similarity: sims[g]})
		}
		return out, len(near)
	}
	lexical, total := b.faqs.SearchCount(q.Text, search.Options{Limit: max(limit, fuseDepth)})
	matched := make(map[int32]bool, len(lexical)) // by group number
	ev := make([]embeddings.Evidence, 0, len(lexical)+len(near))
	for _, r := range lexical {
		g := q.sem.faqGroup[r.Index]
		matched[g] = true
		ev = append(ev, embeddings.Evidence{Item: r.Index, Lexical: r.Score / lexical[0].Score, Similarity: finiteOr0(sims[g])})
	}
	// Every lexical match was read when there are no more than were
	// asked for; else an FAQ found by meaning may also have matched
	// lexically further down, and is not counted twice.
	allRead := total <= len(lexical)
	for _, g := range near {
		if !matched[int32(g)] {
			ev = append(ev, embeddings.Evidence{Item: best[g], Similarity: sims[g]})
		}
	}
	for _, f := range embeddings.Combine(ev, lexicalConfidence(lexical), embeddings.DefaultWeighting, limit) {
		g := q.sem.faqGroup[f.Item]
		if allRead && !matched[g] {
			total++
		}
		out = append(out, faqHit{group: group(f.Item), score: round(f.Score), similarity: finiteOr0(sims[g])})
	}
	return out, max(total, len(out))
}

// Kinds of suggestions.
const (
	KindIntent     = "INTENT"
	KindFAQ        = "FAQ"
	KindHistorical = "HISTORICAL"
)

// SuggestionKinds lists the kinds in merge priority.
func SuggestionKinds() []string { return []string{KindHistorical, KindFAQ, KindIntent} }

// Bold is the matched part of a suggestion.
type Bold struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Suggestion is one autocomplete suggestion.
type Suggestion struct {
	Suggestion string `json:"suggestion"`
	Type       string `json:"type"`
	Answer     string `json:"answer,omitempty"`
	// TruncatedAnswer is Answer short enough to show in a suggestion
	// list (see TruncatedAnswerRunes); the answer itself when it is short.
	TruncatedAnswer string            `json:"truncatedAnswer,omitempty"`
	Format          []map[string]Bold `json:"format"`
}

// Suggest merges the matches of history (past queries, most asked first)
// and of the app's FAQ questions and intent patterns, each text once and
// each FAQ or intent once, at most size.
//
// Past queries the typed text begins come first. The app's own texts are
// then ranked by how well they match: the typed text as the start of the
// text, or of a later word, or with one edit, counts for a literal
// match; the typed words as a search finds them (stems, synonyms, related
// words, the last word as a prefix) count for meaning, so that a user's
// own wording reaches the FAQ that answers it. Past queries matched with
// one edit come last.
func (b *Base) Suggest(text string, kinds map[string]bool, history *search.Suggester, size int) []Suggestion {
	var all []search.Suggestion
	meant := b.meant(text, kinds, size)
	// Matches with one edit are looked for only when the exact ones do
	// not fill the answer.
	for _, typos := range []bool{false, true} {
		own := map[string]bool{}
		for k := range kinds {
			own[k] = k != KindHistorical
		}
		all = b.suggest.Match(text, own, math.MaxInt, typos)
		if kinds[KindHistorical] && history != nil {
			// Past queries are distinct texts; each of them hides at most
			// one of the app's own.
			all = append(all, history.Match(text, map[string]bool{KindHistorical: true}, size, typos)...)
		}
		if b.fills(all, meant, size) {
			break
		}
	}
	return b.merge(all, meant, size)
}

// groupKey names the FAQ or intent of kind with ID group, for showing
// each once.
func groupKey(kind, group string) string { return kind + "\x00" + group }

// suggestionGroup names the FAQ or intent an app's own suggestion belongs to.
func (b *Base) suggestionGroup(s search.Suggestion) string {
	return groupKey(s.Kind, b.groupOf[[2]string{s.Kind, search.NormalText(s.Text)}])
}

// fills reports whether matches and meanings give at least size
// suggestions, each text and each FAQ or intent once.
func (b *Base) fills(all []search.Suggestion, meant map[string]meaning, size int) bool {
	seen := map[string]bool{}
	for g, m := range meant {
		if m.score >= minMeaning {
			seen[g] = true
		}
	}
	for _, s := range all {
		if len(seen) >= size {
			break
		}
		key := search.NormalText(s.Text)
		if s.Kind != KindHistorical {
			key = b.suggestionGroup(s)
		}
		seen[key] = true
	}
	return len(seen) >= size
}

// Weights of a suggestion's literal match, added to its meaning score
// (at most 1): a text the typed text begins ranks above a text found by
// meaning alone only when it matches as well.
const (
	literalAtStart = 1.0
	literalLater   = 0.75
	literalTypo    = 0.25
	// minMeaning is the least share of the typed words' weight a text
	// found by meaning alone must match to be suggested.
	minMeaning = 0.1
	// meaningDepth is how many FAQs and intents a search for meaning
	// reads, per suggestion asked for.
	meaningDepth = 4
)

// meaning is a text found by searching for the typed words.
type meaning struct {
	sug   search.Suggestion
	score float64 // share of the query's weight matched, 0 to 1
	rank  float64 // search score, for ties
}

// meant searches the FAQs and intents of kinds for text, by group (FAQ or
// intent ID), each group's best text.
func (b *Base) meant(text string, kinds map[string]bool, size int) map[string]meaning {
	if !search.Meaningful(text) {
		return nil
	}
	out := map[string]meaning{}
	for _, k := range []struct {
		kind string
		ix   *search.Index
	}{{KindFAQ, b.faqs}, {KindIntent, b.intents}} {
		if !kinds[k.kind] {
			continue
		}
		for _, r := range k.ix.Search(text, search.Options{Limit: meaningDepth * size}) {
			c := search.Candidate{Text: r.Doc.Title, Kind: k.kind}
			if k.kind == KindFAQ {
				c.Answer = b.faqList[r.Doc.Group].Answer
			}
			out[groupKey(k.kind, r.Doc.Group)] = meaning{sug: search.Suggestion{Candidate: c, Bolds: append([]search.Span{}, k.ix.TitleHighlights(r)...)}, score: r.Confidence, rank: r.Score}
		}
	}
	return out
}

// merge orders literal matches and texts found by meaning (see Suggest)
// and keeps each text, and each FAQ or intent, once, at most size.
func (b *Base) merge(literal []search.Suggestion, meant map[string]meaning, size int) []Suggestion {
	all := b.candidates(literal, meant)
	return b.distinct(all, orderCandidates(all), size)
}

// candidate is a suggestion ranked for merge.
type candidate struct {
	s           search.Suggestion
	tier        int // 0 past queries, 1 the app's own, 2 past queries with one edit
	score, rank float64
}

// candidates ranks the literal matches, each with the score of its
// meaning, and the texts found by meaning alone that score enough.
func (b *Base) candidates(literal []search.Suggestion, meant map[string]meaning) []candidate {
	var all []candidate
	used := map[string]bool{} // meanings joined to a literal match
	for _, s := range literal {
		r := candidate{s: s, tier: 1}
		switch {
		case s.Kind == KindHistorical && s.Exact:
			r.tier = 0
		case s.Kind == KindHistorical:
			r.tier = 2
		default:
			switch {
			case !s.Exact:
				r.score = literalTypo
			case s.AtStart:
				r.score = literalAtStart
			default:
				r.score = literalLater
			}
			g := b.suggestionGroup(s)
			if m, ok := meant[g]; ok {
				r.score += m.score
				r.rank = m.rank
				used[g] = true
			}
		}
		all = append(all, r)
	}
	for _, g := range slices.Sorted(maps.Keys(meant)) {
		if m := meant[g]; !used[g] && m.score >= minMeaning {
			all = append(all, candidate{s: m.sug, tier: 1, score: m.score, rank: m.rank})
		}
	}
	return all
}

// orderCandidates sorts all, best first, and returns the order they are
// offered in.
func orderCandidates(all []candidate) []int {
	// Ties keep the order of the matches (weight, then text) and, among
	// texts found by meaning alone, of their groups.
	slices.SortStableFunc(all, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(x.tier, y.tier), cmp.Compare(y.score, x.score), cmp.Compare(y.rank, x.rank))
	})
	// Texts that match equally well ("do you" begins dozens) take turns
	// by kind, so that a list of one kind does not hide the other.
	nth := make([]int, len(all))
	for i := range all {
		for j := i - 1; j >= 0 && all[j].tier == all[i].tier && all[j].score == all[i].score && all[j].rank == all[i].rank; j-- {
			if all[j].s.Kind == all[i].s.Kind {
				nth[i] = nth[j] + 1
				break
			}
		}
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		x, y := all[i], all[j]
		return cmp.Or(cmp.Compare(x.tier, y.tier), cmp.Compare(y.score, x.score), cmp.Compare(y.rank, x.rank),
			cmp.Compare(nth[i], nth[j]), cmp.Compare(priority(x.s.Kind), priority(y.s.Kind)))
	})
	return order
}

// distinct is the suggestions of all in order, each text and each FAQ or
// intent once, at most size.
func (b *Base) distinct(all []candidate, order []int, size int) []Suggestion {
	out := []Suggestion{}
	seen := map[string]bool{}
	for _, i := range order {
		if len(out) >= size {
			break
		}
		s := all[i].s
		key := search.NormalText(s.Text)
		group := ""
		if s.Kind != KindHistorical {
			group = b.suggestionGroup(s)
		}
		if seen[key] || (group != "" && seen[group]) {
			continue
		}
		seen[key] = true
		if group != "" {
			seen[group] = true
		}
		format := []map[string]Bold{}
		if s.Bolds == nil {
			format = append(format, map[string]Bold{"bold": {Start: s.Bold.Start, End: s.Bold.End}})
		}
		for _, sp := range s.Bolds {
			format = append(format, map[string]Bold{"bold": {Start: sp.Start, End: sp.End}})
		}
		out = append(out, Suggestion{Suggestion: s.Text, Type: s.Kind, Answer: s.Answer, TruncatedAnswer: truncateAnswer(s.Answer), Format: format})
	}
	return out
}

// priority is where a kind stands in merge priority (SuggestionKinds),
// without building the list on every comparison.
func priority(kind string) int {
	switch kind {
	case KindHistorical:
		return 0
	case KindFAQ:
		return 1
	}
	return 2
}

// History builds the suggester of past queries from their counts.
func History(queries []QueryCount) *search.Suggester {
	cands := make([]search.Candidate, 0, len(queries))
	for _, q := range queries {
		cands = append(cands, search.Candidate{Text: q.Query, Kind: KindHistorical, Weight: float64(q.Asked)})
	}
	return search.NewSuggester(cands)
}

// QueryCount is how often a normalised query was asked.
type QueryCount struct {
	Query string
	Asked uint64
}
