package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// historyBundle is an app with a channel whose suggestions the tests ask
// for, and an intent whose pattern is also among the past queries.
const historyBundle = `{
 "organizations": [{"id": "org-1", "name": "One"}],
 "apps": [{"appId": "app-1", "organizationId": "org-1", "name": "App one", "channels": [{"id": "web", "type": "CHAT", "key": "k1"}]}],
 "intents": [{"appId": "app-1", "intentId": "OrderStatus", "utterancePatterns": ["where is my order"]}]
}`

type historyResponse struct {
	status int
	header http.Header
	body   string
}

// serveHistory serves the content API on the real SQLite store with its
// HISTORICAL suggestions from hist, and returns a GET of a path with the
// app's token.
func serveHistory(t *testing.T, hist contentapi.History) func(path, token string) historyResponse {
	t.Helper()
	store, tokens := fixture.Open(t, historyBundle, map[string]tenancy.Token{"app1": {OrganizationID: "org-1", AppID: "app-1"}})
	svc, err := contentapi.NewService(contentapi.ServiceConfig{API: contentapi.Config{History: hist, HistoryRefresh: time.Millisecond}},
		store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return func(path, token string) historyResponse {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens[token])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return historyResponse{resp.StatusCode, resp.Header, string(b)}
	}
}

// The suggestions of past queries as the api serves them: read from
// ClickHouse through the api's History, blocked texts left out, and the
// endpoint still answering, without them, while ClickHouse is down.
func TestHistoricalSuggestionsFromClickHouse(t *testing.T) {
	srv := devclickhouse.StartForTest(t)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, Database: "hist"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var rows chstore.EventBatch
	// ask writes query as asked by users distinct users, each in a
	// session of their own and from a network of their own, each times
	// times, days ago.
	ask := func(q, channel string, users, times, daysAgo int) {
		at := now.AddDate(0, 0, -daysAgo)
		for u := range users {
			for range times {
				i := rows.AddRow()
				rows.EventID[i], rows.AppID[i], rows.EventTime[i], rows.ReceivedAt[i], rows.Channel[i], rows.UserID[i], rows.RawQuery[i] =
					fmt.Sprintf("e%d", i), "app-1", at, now, channel, fmt.Sprintf("user-%d", u), q
				rows.SessionID[i], rows.TokenID[i], rows.ClientNetwork[i] = fmt.Sprintf("session-%d", u), "0123456789abcdef", fmt.Sprintf("198.51.%d.0/24", u)
			}
		}
	}
	// Suggested: asked by at least five distinct users (the default)
	// within 90 days (the default).
	ask("where is the riverside store", "web", 7, 1, 0)
	ask("Where is my parcel", "web", 5, 1, 1)
	ask("Where is my parcel", "web", 1, 1, 80)
	ask("where is my order", "web", 5, 1, 0) // also an intent pattern: suggested once, as HISTORICAL
	// Never suggested: by too few users, however often; with personal
	// data, however many users; before the window; on another channel.
	ask("where is the cafe", "web", 4, 25, 0)
	ask("where is jo.doe@example.com", "web", 1, 50, 0)
	ask("where is jo@example.com", "web", 9, 3, 0)
	ask("where is +1 (555) 123-4567", "web", 9, 3, 0)
	ask("where is order 98765432", "web", 9, 3, 0)
	ask("where is https://shop.example/orders", "web", 9, 3, 0)
	ask("where is the old store", "web", 10, 1, 100)
	ask("where else", "phone", 9, 1, 0)
	if err := s.InsertEvents(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	hist := newClickHouseHistory(chstore.Config{Addrs: []string{srv.Addr()}, Database: "hist"}, queryhistory.Suggestable{})
	defer hist.Close()
	get := serveHistory(t, hist)
	var body struct{ Suggestions []knowledge.Suggestion }
	deadline := time.Now().Add(10 * time.Second)
	for { // the view's rows land just after the events'
		r := get("/cms/suggestions?key=k1&queryText=where+is", "app1")
		body.Suggestions = nil
		_ = json.Unmarshal([]byte(r.body), &body)
		if len(body.Suggestions) >= 3 && r.header.Get(contentapi.OmittedHeader) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HISTORICAL suggestions within 10s: %s %v", r.body, r.header)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got []string
	for _, s := range body.Suggestions {
		got = append(got, s.Type+":"+s.Suggestion)
	}
	if want := "HISTORICAL:where is the riverside store|HISTORICAL:where is my parcel|HISTORICAL:where is my order"; strings.Join(got, "|") != want {
		t.Errorf("suggestions %q, want %q", strings.Join(got, "|"), want)
	}
	// An operator blocks a text: the suggestions leave it out once the
	// cache reads the channel again (HistoryRefresh).
	if _, err := queryhistory.BlockSuggestion(ctx, s, "app-1", "", "Where is the riverside store", true); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r := get("/cms/suggestions?key=k1&queryText=where+is&type=historical", "app1")
		if !strings.Contains(r.body, "riverside") && strings.Contains(r.body, "where is my parcel") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the blocked text is still suggested 10s later: %s", r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// ClickHouse down: the endpoint still answers, without HISTORICAL,
	// and says so.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r := get("/cms/suggestions?key=k1&queryText=where+is&type="+url.QueryEscape("historical,intent"), "app1")
		if r.status != http.StatusOK {
			t.Fatalf("with ClickHouse down: %d %s", r.status, r.body)
		}
		if r.header.Get(contentapi.OmittedHeader) == "HISTORICAL" {
			if !strings.Contains(r.body, `"INTENT"`) || strings.Contains(r.body, "HISTORICAL") {
				t.Errorf("with ClickHouse down: %s", r.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HISTORICAL still served 10s after ClickHouse stopped: %s", r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
