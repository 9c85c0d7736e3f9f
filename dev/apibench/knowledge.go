package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/assistantcms/cms/internal/textcorpus"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
)

// The goals of the knowledge suite.
const (
	goalSearchP99      = 25 * time.Millisecond
	goalSuggestionsP99 = 10 * time.Millisecond
	knowledgeDocs      = 10_000
	knowledgeFAQs      = 1_000
	evalContent        = "pkg/content/knowledge/testdata/eval/content.json"
	evalQuestions      = "pkg/content/knowledge/testdata/eval/questions.json"
)

func knowledgeSuite() suite {
	var questions []struct {
		Question string `json:"question"`
		Target   string `json:"target"`
	}
	return suite{
		concurrency: 16,
		app:         "eval-app",
		bundle: func() ([]byte, error) {
			f, err := os.Open(evalContent)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			file, err := bundle.Read(f, bundle.JSON)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", evalContent, err)
			}
			b := file.Bundle
			byKind := map[content.Kind][]content.Record{}
			for _, r := range b.Records {
				byKind[r.Kind] = append(byKind[r.Kind], r)
			}
			docs, err := textcorpus.Grow(byKind[content.KindDocument], knowledgeDocs, "document", 1)
			if err != nil {
				return nil, err
			}
			faqs, err := textcorpus.Grow(byKind[content.KindFAQ], knowledgeFAQs, "answer", 2)
			if err != nil {
				return nil, err
			}
			b.Records = append(append(byKind[content.KindIntent], docs...), faqs...)
			if qraw, err := os.ReadFile(evalQuestions); err != nil {
				return nil, err
			} else if err := json.Unmarshal(qraw, &questions); err != nil {
				return nil, fmt.Errorf("%s: %w", evalQuestions, err)
			}
			var out bytes.Buffer
			if err := bundle.Write(&out, &b, bundle.JSON); err != nil {
				return nil, err
			}
			return out.Bytes(), nil
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
		semantic: func(apiURL string) string {
			return apiURL + "/cms/search?question=" + url.QueryEscape("how do I fix a puncture")
		},
		goals: func(name string) (float64, time.Duration) {
			if strings.Contains(name, "suggestions") {
				return 0, goalSuggestionsP99
			}
			return 0, goalSearchP99
		},
	}
}
