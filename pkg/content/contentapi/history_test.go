package contentapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// fakeHistory answers past queries from memory and records what it was
// asked; the ClickHouse History is tested where the api is assembled
// (cmd/api).
type fakeHistory struct {
	mu      sync.Mutex
	queries []knowledge.QueryCount
	err     error
	asked   []string // appID/channel of each read
}

func (f *fakeHistory) TopQueries(_ context.Context, appID, channel string, limit int) ([]knowledge.QueryCount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, appID+"/"+channel)
	if f.err != nil {
		return nil, f.err
	}
	return f.queries[:min(limit, len(f.queries))], nil
}

func (f *fakeHistory) reads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func suggestions(t *testing.T, r response) []string {
	t.Helper()
	var body struct{ Suggestions []knowledge.Suggestion }
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	var got []string
	for _, s := range body.Suggestions {
		got = append(got, s.Type+":"+s.Suggestion)
	}
	return got
}

func TestHistoricalSuggestionsFromTheHistory(t *testing.T) {
	hist := &fakeHistory{queries: []knowledge.QueryCount{
		{Query: "where is the riverside store", Asked: 7},
		{Query: "where is my order", Asked: 5}, // also an intent pattern: suggested once, as HISTORICAL
		{Query: "opening hours", Asked: 9},
	}}
	e := newEnv(t, ServiceConfig{API: Config{History: hist, HistoryRefresh: time.Hour}})
	r := e.get("/cms/suggestions?key=k1&queryText=where+is", "app1")
	if r.status != 200 || r.header.Get(OmittedHeader) != "" {
		t.Fatalf("%d %s %v", r.status, r.body, r.header)
	}
	if got, want := strings.Join(suggestions(t, r), "|"), "HISTORICAL:where is the riverside store|HISTORICAL:where is my order"; got != want {
		t.Errorf("suggestions %q, want %q", got, want)
	}
	// The channel's queries are kept for HistoryRefresh: keystrokes cost
	// no read.
	e.get("/cms/suggestions?key=k1&queryText=where+is+the", "app1")
	if got := hist.reads(); strings.Join(got, ",") != "app-1/web" {
		t.Errorf("reads of the history %v, want one of app-1/web", got)
	}
}

func TestSuggestionsSayHistoricalIsMissingWhenTheHistoryFails(t *testing.T) {
	hist := &fakeHistory{err: errors.New("connection refused")}
	e := newEnv(t, ServiceConfig{API: Config{History: hist}})
	r := e.get("/cms/suggestions?key=k1&queryText=where+is&type=historical,intent", "app1")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := r.header.Get(OmittedHeader); got != "HISTORICAL" {
		t.Errorf("%s: %q, want HISTORICAL", OmittedHeader, got)
	}
	if got := strings.Join(suggestions(t, r), "|"); got != "INTENT:where is my order" {
		t.Errorf("suggestions %q, want the intent's pattern only", got)
	}
	// A failed read is not tried again at once, so that an unreachable
	// store costs little.
	e.get("/cms/suggestions?key=k1&queryText=where", "app1")
	if got := hist.reads(); len(got) != 1 {
		t.Errorf("reads of the failing history %v, want one", got)
	}
}
