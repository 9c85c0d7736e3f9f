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
}

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
// match for the service to claim an answer.
const answerThreshold = 0.6

// Answer retrieves passages from the documents (in location, when given)
// and the FAQs, and answers from them: with gen when it is set and
// succeeds, else with the best supporting sentences (extractive). When
// nothing matches enough, HasAnswer is false. genErr reports a generator
// failure that the extractive answer covered.
func (b *Base) Answer(ctx context.Context, question, location string, gen Generator, temperature float64) (a Answer, genErr error) {
	a.Sources = []Source{}
	docs := b.docs.Search(question, search.Options{Limit: 5, Location: location})
	passages := b.docs.Passages(question, docs, 3)
	faqs := b.faqs.Search(question, search.Options{Limit: 2})

	var retrieved []Passage
	best := 0.0
	var extractive string
	// A FAQ that matches the question at least as well as the best
	// passage answers it; else the best passage's best sentence does.
	// Passages come best first.
	useFAQ := len(faqs) > 0 && faqs[0].Confidence >= answerThreshold &&
		(len(passages) == 0 || faqs[0].Confidence >= passages[0].Confidence)
	if useFAQ {
		f := b.faqList[faqs[0].Doc.Group]
		retrieved = append(retrieved, Passage{Title: f.Name, URL: f.URL, Text: f.Questions[0] + " " + f.Answer})
		best, extractive = faqs[0].Confidence, f.Answer
		a.Sources = append(a.Sources, Source{URL: f.URL, Title: f.Name})
	}
	for i, p := range passages {
		if p.Confidence < answerThreshold {
			continue
		}
		retrieved = append(retrieved, Passage{Title: p.Result.Doc.Title, URL: p.Result.Doc.URI, Text: p.Text})
		if i == 0 && !useFAQ {
			best, extractive = p.Confidence, utf16Slice(p.Text, p.Sentence)
		}
		if !hasSource(a.Sources, p.Result.Doc.URI) {
			a.Sources = append(a.Sources, Source{URL: p.Result.Doc.URI, Title: p.Result.Doc.Title})
		}
	}
	if best < answerThreshold {
		return Answer{Result: "I could not find an answer to that in the knowledge base.", Sources: []Source{}}, nil
	}
	a.HasAnswer = true
	a.Result = extractive
	if gen != nil {
		text, err := gen.Generate(ctx, question, retrieved, temperature)
		if err == nil && strings.TrimSpace(text) != "" {
			a.Result = strings.TrimSpace(text)
		} else if err != nil {
			genErr = err
		}
	}
	return a, genErr
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
