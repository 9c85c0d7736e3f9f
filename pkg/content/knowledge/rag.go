package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content/search"
)

// Source is a document or FAQ an answer draws on.
type Source struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// Kind (KindFAQ or KindDocument) and ID, its record ID, name the
	// item, for a caller that relates an answer to the content it drew
	// on; the response body leaves them out.
	Kind string `json:"-"`
	ID   string `json:"-"`
}

// KindDocument is the Kind of a Source that is a document.
const KindDocument = "DOCUMENT"

// Answer is the body of GET /cms/rag.
type Answer struct {
	Result    string   `json:"result"`
	HasAnswer bool     `json:"hasAnswer"`
	Sources   []Source `json:"sources"`
}

// Passage is retrieved text handed to a generator.
type Passage struct {
	Title, URL, Text string
}

// Generator writes an answer from retrieved passages.
type Generator interface {
	Generate(ctx context.Context, question string, passages []Passage, temperature float64) (string, error)
}

// answerThreshold is the share of the question a retrieved passage must
// match lexically for the service to claim an answer, when it answers
// by words alone.
const answerThreshold = 0.6

// Margins of answering by meaning as well as words: the best FAQ's or
// document's combined score (see embeddings.Combine) must stand this far
// above the next one's. A wrong answer given with confidence is worse
// than none, and how far the best stands out says more of whether it is
// right than its score does. Measured on the labelled evaluation set
// (go run ./dev/searcheval): margins from 0.08 to 0.12 for FAQs and 0.04
// for documents kept wrong answers to about 5% of the questions in
// five-fold cross-validation; these are the middle of that range.
//
// The best must also mean something near the question: an FAQ's
// similarity (its best question's, with its answer's share) at least
// faqAnswerSimilarity, a document's at least docAnswerSimilarity. Without
// them, a question the model cannot read (another language, noise) is
// answered by whichever item stands out among unrelated ones. These are
// about the tenth percentile of the similarity of right answers on the
// evaluation set; they cost about a tenth of the right answers and kept
// every foreign-language and nonsense question tried from an answer.
// Similarities are the Universal Sentence Encoder's; another model's lie
// elsewhere.
const (
	faqAnswerMargin     = 0.10
	docAnswerMargin     = 0.04
	faqAnswerSimilarity = 0.5
	docAnswerSimilarity = 0.4
)

// noAnswer is the result when nothing answers the question.
const noAnswer = "I could not find an answer to that in the knowledge base."

// Answer retrieves passages from the documents (in location, when given)
// and the FAQs, and answers from them: with gen when it is set and
// succeeds, else with the best supporting text (extractive). With an
// embedder, documents and FAQs are ranked by words and meaning together,
// as search ranks them, and an FAQ or document answers when it stands
// out from the next; else by words alone. When nothing answers well
// enough, HasAnswer is false. genErr reports a generator failure that
// the extractive answer covered.
func (b *Base) Answer(ctx context.Context, question, location string, gen Generator, temperature float64) (a Answer, genErr error) {
	q := b.Understand(ctx, question)
	defer q.Release()
	return b.AnswerQuery(ctx, q, location, gen, temperature)
}

// AnswerQuery is Answer for a question understood (see Understand), as
// SearchQuery is Search's: a caller that also searches or matches FAQs
// for the question embeds it once. A Query without the question's vector
// is answered by words alone.
func (b *Base) AnswerQuery(ctx context.Context, q Query, location string, gen Generator, temperature float64) (Answer, error) {
	var retrieved []Passage
	var a Answer
	var extractive string
	if q.semantic() {
		retrieved, extractive, a.Sources = b.retrieveHybrid(q, location)
	} else {
		retrieved, extractive, a.Sources = b.retrieveLexically(q.Text, location)
	}
	if len(a.Sources) == 0 {
		return Answer{Result: noAnswer, Sources: []Source{}}, nil
	}
	a.HasAnswer = true
	a.Result = extractive
	var genErr error
	if gen != nil {
		text, err := gen.Generate(ctx, q.Text, retrieved, temperature)
		if err == nil && strings.TrimSpace(text) != "" {
			a.Result = strings.TrimSpace(text)
		} else if err != nil {
			genErr = err
		}
	}
	return a, genErr
}

// retrieveLexically finds what answers question by its words: an FAQ or
// passages that match at least answerThreshold of it, best first, with
// the extractive answer. No sources means no answer.
func (b *Base) retrieveLexically(question, location string) ([]Passage, string, []Source) {
	docs := b.docs.Search(question, search.Options{Limit: 5, Location: location})
	passages := b.docs.Passages(question, docs, 3)
	faqs := b.faqs.Search(question, search.Options{Limit: 2})

	var retrieved []Passage
	var extractive string
	sources := []Source{}
	// A FAQ that matches the question at least as well as the best
	// passage answers it; else the best passage's best sentence does.
	// Passages come best first.
	useFAQ := len(faqs) > 0 && faqs[0].Confidence >= answerThreshold &&
		(len(passages) == 0 || faqs[0].Confidence >= passages[0].Confidence)
	if useFAQ {
		f := b.faqList[faqs[0].Doc.Group]
		retrieved = append(retrieved, Passage{Title: f.Name, URL: f.URL, Text: f.Questions[0] + " " + f.Answer})
		extractive = f.Answer
		sources = append(sources, Source{URL: f.URL, Title: f.Name, Kind: KindFAQ, ID: f.ID})
	}
	for i, p := range passages {
		if p.Confidence < answerThreshold {
			continue
		}
		retrieved = append(retrieved, Passage{Title: p.Result.Doc.Title, URL: p.Result.Doc.URI, Text: p.Text})
		if i == 0 && !useFAQ {
			extractive = utf16Slice(p.Text, p.Sentence)
		}
		if !hasSource(sources, p.Result.Doc.URI) {
			sources = append(sources, Source{URL: p.Result.Doc.URI, Title: p.Result.Doc.Title, Kind: KindDocument, ID: p.Result.Doc.ID})
		}
	}
	if !useFAQ && (len(passages) == 0 || passages[0].Confidence < answerThreshold) {
		return nil, "", []Source{} // the best passage does not match enough
	}
	return retrieved, extractive, sources
}

// retrieveHybrid finds what answers q by words and meaning: the best FAQ
// when its combined score stands faqAnswerMargin above the next FAQ's,
// the best document's passage nearest in meaning when the document
// stands docAnswerMargin above the next; the higher scoring first when
// both do. No sources means no answer.
func (b *Base) retrieveHybrid(q Query, location string) ([]Passage, string, []Source) {
	faqs, _ := b.faqResults(q, 2)
	docs := b.docRanking(q, location, 2)
	faqOK := len(faqs) > 0 && faqs[0].similarity >= faqAnswerSimilarity &&
		stands(faqs[0].score, faqs[1:], func(h faqHit) float64 { return h.score }, faqAnswerMargin)
	docOK := len(docs) > 0 && docs[0].passage >= 0 && docs[0].similarity >= docAnswerSimilarity &&
		stands(docs[0].score, docs[1:], func(d rankedDoc) float64 { return d.score }, docAnswerMargin)

	var retrieved []Passage
	var extractive string
	sources := []Source{}
	addFAQ := func() {
		f := b.faqList[faqs[0].group]
		retrieved = append(retrieved, Passage{Title: f.Name, URL: f.URL, Text: f.Questions[0] + " " + f.Answer})
		sources = append(sources, Source{URL: f.URL, Title: f.Name, Kind: KindFAQ, ID: f.ID})
		if extractive == "" {
			extractive = f.Answer
		}
	}
	addDoc := func() {
		d := docs[0]
		p := q.sem.docPassages(d.Index)[d.passage]
		text := strings.TrimSpace(d.Doc.Body[p.start:p.end])
		retrieved = append(retrieved, Passage{Title: d.Doc.Title, URL: d.Doc.URI, Text: text})
		if !hasSource(sources, d.Doc.URI) {
			sources = append(sources, Source{URL: d.Doc.URI, Title: d.Doc.Title, Kind: KindDocument, ID: d.Doc.ID})
		}
		if extractive == "" {
			extractive = text
		}
	}
	switch {
	case faqOK && (!docOK || faqs[0].score >= docs[0].score):
		addFAQ()
		if docOK {
			addDoc()
		}
	case docOK:
		addDoc()
		if faqOK {
			addFAQ()
		}
	}
	return retrieved, extractive, sources
}

// stands reports whether best is at least margin above the best of rest
// (or above zero when there is no rest).
func stands[T any](best float64, rest []T, score func(T) float64, margin float64) bool {
	next := 0.0
	if len(rest) > 0 {
		next = score(rest[0])
	}
	return best-next >= margin
}

func hasSource(list []Source, url string) bool {
	for _, s := range list {
		if s.URL == url {
			return true
		}
	}
	return false
}

// OpenAI is a Generator for any OpenAI-compatible chat-completions
// endpoint.
type OpenAI struct {
	// BaseURL is the API root, e.g. https://api.example.com/v1; the
	// request goes to BaseURL + "/chat/completions".
	BaseURL string
	Model   string
	APIKey  string
	Client  *http.Client
}

// Generate implements Generator: the passages go in the prompt, numbered,
// and the model is asked to answer from them only and cite them.
func (o *OpenAI) Generate(ctx context.Context, question string, passages []Passage, temperature float64) (string, error) {
	var sb strings.Builder
	for i, p := range passages {
		fmt.Fprintf(&sb, "[%d] %s (%s)\n%s\n\n", i+1, p.Title, p.URL, p.Text)
	}
	body, err := json.Marshal(map[string]any{
		"model":       o.Model,
		"temperature": temperature,
		"messages": []map[string]string{
			{"role": "system", "content": "You answer customers' questions using only the numbered passages given. " +
				"Cite the passages you use as [n]. If they do not answer the question, say so briefly."},
			{"role": "user", "content": "Passages:\n\n" + sb.String() + "Question: " + question},
		},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("generator request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("generator: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("generator: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("generator answered %d: %.200s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("generator answer is not a chat completion: %.200s", raw)
	}
	return out.Choices[0].Message.Content, nil
}
