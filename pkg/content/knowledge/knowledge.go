// Package knowledge answers questions from an app's content: ranked
// search over its knowledge-base documents with answer passages, FAQ
// matching over every question variant, retrieval-augmented answers, and
// autocomplete suggestions. It builds on package search and knows the
// shapes the reference client reads.
package knowledge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/assistantcms/cms/pkg/content"
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

// Build indexes an app's documents, FAQs and intents.
func Build(docs, faqs, intents []content.Record) (*Base, error) {
	return BuildWithEntities(docs, faqs, intents, nil)
}

// BuildWithEntities is Build that also reads the app's entities. Query
// words are expanded with synonyms found in the app's own content: entity
// values and their synonyms, and words used interchangeably across one
// FAQ's questions or one intent's utterance patterns.
func BuildWithEntities(docs, faqs, intents, entities []content.Record) (*Base, error) {
	b := &Base{faqList: make(map[string]faq, len(faqs))}
	synonyms, err := synonymSets(faqs, intents, entities)
	if err != nil {
		return nil, err
	}
	sdocs := make([]search.Doc, 0, len(docs))
	for _, r := range docs {
		var f docFields
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("document %q: %w", r.ID, err)
		}
		sdocs = append(sdocs, search.Doc{ID: r.ID, Title: f.Title, Body: f.Document, URI: f.URI, Location: f.Location})
	}
	b.docs = search.BuildWithSynonyms(sdocs, synonyms)
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
		}
	}
	b.faqs = search.BuildWithSynonyms(variants, synonyms)

	seen := map[string]bool{}
	for _, r := range intents {
		var f struct {
			UtterancePatterns []string `json:"utterancePatterns"`
		}
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			return nil, fmt.Errorf("intent %q: %w", r.ID, err)
		}
		for _, p := range f.UtterancePatterns {
			text := plainPattern(p)
			if text != "" && !seen[strings.ToLower(text)] {
				seen[strings.ToLower(text)] = true
				cands = append(cands, search.Candidate{Text: text, Kind: KindIntent})
			}
		}
	}
	b.suggest = search.NewSuggester(cands)
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
			texts = append(texts, plainPattern(p))
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

// plainPattern is an utterance pattern without its slot references: the
// words a user types before filling a slot in.
func plainPattern(p string) string {
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

// Search ranks the app's documents for question. With location, only
// documents whose location is exactly that are searched.
func (b *Base) Search(question, location string) SearchResult {
	res := b.docs.Search(question, search.Options{Limit: maxDocuments, Location: location})
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
		d := Document{Title: p.Result.Doc.Title, URI: p.Result.Doc.URI, Document: p.Text, Highlights: b.highlights(p.Result, p.Start, p.End)}
		for i, h := range d.Highlights {
			d.Highlights[i].TopAnswer = h.BeginOffset >= p.Sentence.Start && h.EndOffset <= p.Sentence.End
		}
		out.Suggested = append(out.Suggested, Suggested{Document: d, TopAnswer: utf16Slice(p.Text, p.Sentence), MatchConfidence: round(p.Confidence)})
	}
	return out
}

func (b *Base) document(r search.Result) Document {
	d := r.Doc
	out := Document{Title: d.Title, URI: d.URI, Document: d.Body, Highlights: b.highlights(r, 0, math.MaxInt32), head: b.docHeads[r.Index]}
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

func round(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// FAQ is a StudioFAQ with its score.
type FAQ struct {
	Created   string   `json:"created"`
	Questions []string `json:"questions"`
	Name      string   `json:"name"`
	Answer    string   `json:"answer"`
	URL       string   `json:"url,omitempty"`
	Score     float64  `json:"_score"`
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
	res, total := b.faqs.SearchCount(question, search.Options{Limit: max(limit, 1)})
	out := FAQResult{Total: total, FAQ: []FAQ{}}
	for _, r := range res[:min(len(res), max(limit, 0))] {
		f := b.faqList[r.Doc.Group]
		out.FAQ = append(out.FAQ, FAQ{Created: f.Created, Questions: f.Questions, Name: f.Name, Answer: f.Answer, URL: f.URL, Score: round(r.Score)})
	}
	return out
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
// and of the app's FAQ questions and intent patterns, each text once, at
// most size. Exact matches come before matches with one edit; within
// each, HISTORICAL before FAQ before INTENT; then texts that start with
// the typed text before those with a later word that does.
func (b *Base) Suggest(text string, kinds map[string]bool, history *search.Suggester, size int) []Suggestion {
	var out []Suggestion
	// Matches with one edit come after every exact one, so they are looked
	// for only when the exact ones do not fill the answer.
	for _, typos := range []bool{false, true} {
		own := map[string]bool{}
		for k := range kinds {
			own[k] = k != KindHistorical
		}
		all := b.suggest.Match(text, own, math.MaxInt, typos)
		if kinds[KindHistorical] && history != nil {
			// Past queries are distinct texts; each of them hides at most
			// one of the app's own.
			all = append(all, history.Match(text, map[string]bool{KindHistorical: true}, size, typos)...)
		}
		if out = merge(all, size); len(out) >= size {
			break
		}
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

// merge orders matches, exact ones first, then by kind in merge priority,
// then those at the start of their text first, and keeps each text once,
// at most size.
func merge(all []search.Suggestion, size int) []Suggestion {
	tier := func(s search.Suggestion) int {
		if s.Exact {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(all, func(x, y search.Suggestion) int {
		return cmp.Or(cmp.Compare(tier(x), tier(y)), cmp.Compare(priority(x.Kind), priority(y.Kind)), compareBool(y.AtStart, x.AtStart))
	})
	out := []Suggestion{}
	seen := map[string]bool{}
	for _, s := range all {
		key := search.NormalText(s.Text)
		if seen[key] || len(out) >= size {
			continue
		}
		seen[key] = true
		out = append(out, Suggestion{Suggestion: s.Text, Type: s.Kind, Answer: s.Answer, TruncatedAnswer: truncateAnswer(s.Answer),
			Format: []map[string]Bold{{"bold": {Start: s.Bold.Start, End: s.Bold.End}}}})
	}
	return out
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

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
