package contentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestHistoryOverREST: a change made over GraphQL is attributed to its
// token, client network, user agent and request ID, whatever the body
// says; a management token reads the record's revisions, their
// difference and the audit log; a runtime token, a token of another app
// and one of another organization read nothing.
func TestHistoryOverREST(t *testing.T) {
	e := newEnvWith(t, fixtureBundle, map[string]tenancy.Token{
		"app1":    {OrganizationID: "org-1", AppID: "app-1"},
		"app2":    {OrganizationID: "org-1", AppID: "app-2"},
		"org2":    {OrganizationID: "org-2"},
		"runtime": {OrganizationID: "org-1", AppID: "app-1", Scopes: tenancy.RuntimeScopes},
	}, ServiceConfig{})
	// The body claims another author; the log must not believe it.
	body := `{"query":"mutation { updateHandler(handlerId: \"HelpIntent\", handler: {name: \"Help, edited\", extra: {tokenId: \"forged\"}}) { revision } }"}`
	r := e.do(http.MethodPost, "/cms/graphql", body, "Authorization", "Bearer "+e.tokens["app1"], "User-Agent", "catalogue-sync/2.1", "X-Request-Id", "req-42")
	if r.status != http.StatusOK || strings.Contains(r.body, "errors") {
		t.Fatalf("update: %d %s", r.status, r.body)
	}

	var revs struct {
		Revisions []struct {
			Revision int64           `json:"revision"`
			AuditID  string          `json:"auditId"`
			Document json.RawMessage `json:"document"`
		} `json:"revisions"`
	}
	r = e.get("/cms/history/handler/HelpIntent", "app1")
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &revs) != nil || len(revs.Revisions) != 2 || !strings.Contains(string(revs.Revisions[0].Document), "Help, edited") {
		t.Fatalf("revisions: %d %s", r.status, r.body)
	}
	r = e.get(fmt.Sprintf("/cms/history/handler/HelpIntent/diff?from=%d&to=%d", revs.Revisions[1].Revision, revs.Revisions[0].Revision), "app1")
	if r.status != http.StatusOK || !strings.Contains(r.body, `{"path":"name","before":"Help","after":"Help, edited"}`) {
		t.Errorf("diff: %d %s", r.status, r.body)
	}
	var log struct {
		Entries []map[string]any `json:"entries"`
	}
	r = e.get("/cms/audit?kind=handler&id=HelpIntent&limit=1", "app1")
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &log) != nil || len(log.Entries) != 1 {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	got := log.Entries[0]
	if got["operation"] != "updateHandler" || got["userAgent"] != "catalogue-sync/2.1" || got["requestId"] != "req-42" ||
		got["clientNetwork"] != "127.0.0.0/24" || got["tokenId"] == "forged" || got["tokenId"] == "" || got["id"] != revs.Revisions[0].AuditID {
		t.Errorf("the update's entry: %v", got)
	}
	if strings.Contains(r.body, e.tokens["app1"]) {
		t.Error("the audit log holds a token's secret")
	}

	for _, c := range []struct {
		token, path string
		status      int
	}{
		{"runtime", "/cms/history/handler/HelpIntent", 403},
		{"runtime", "/cms/audit", 403},
		{"app2", "/cms/history/handler/HelpIntent?appId=app-1", 403},
		{"org2", "/cms/audit?appId=app-1", 403},
		{"", "/cms/audit", 401},
		{"app1", "/cms/history/widget/HelpIntent", 400},
		{"app1", "/cms/history/handler/HelpIntent/diff?from=1", 400},
		{"app1", "/cms/audit?from=yesterday", 400},
		{"app1", "/cms/audit?kind=handler", 400},
		{"app1", "/cms/history/handler/HelpIntent?limit=5000", 400},
	} {
		r := e.get(c.path, c.token)
		if r.status != c.status || strings.Contains(r.body, "Help, edited") {
			t.Errorf("%s %s: %d %s; want %d", c.token, c.path, r.status, r.body, c.status)
		}
	}
}

// pruningStore tells each pruning's result.
type pruningStore struct {
	*contentdb.DB
	pruned chan content.Pruned
}

func (s pruningStore) PruneHistory(ctx context.Context, before time.Time, keep int) (content.Pruned, error) {
	p, err := s.DB.PruneHistory(ctx, before, keep)
	if err == nil {
		s.pruned <- p
	}
	return p, err
}

// TestServePrunesHistory: a serving api prunes content history at start,
// as configured, keeping each record's newest revisions.
func TestServePrunesHistory(t *testing.T) {
	store, _ := fixture.Open(t, fixtureBundle, nil)
	for _, name := range []string{"blue", "green"} {
		_, err := store.UpdateRecord(contenttest.Acting(t.Context()), "app-1", content.KindEntity, "COLOR", 0, func(r content.Record) (content.Record, error) {
			r.Doc = []byte(`{"entityId":"COLOR","values":[{"name":"` + name + `"}]}`)
			return r, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ps := pruningStore{DB: store, pruned: make(chan content.Pruned, 1)}
	svc, err := NewService(ServiceConfig{Retention: Retention{Age: time.Nanosecond, Keep: 1, Interval: time.Hour}}, ps, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, ln) }()
	select {
	case p := <-ps.pruned:
		if p.Revisions != 2 {
			t.Errorf("pruned %+v; want COLOR's two older revisions", p)
		}
	case <-time.After(time.Minute):
		t.Fatal("the api did not prune at start")
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if revs, err := store.Revisions(t.Context(), "app-1", content.KindEntity, "COLOR", 0, 0); err != nil || len(revs) != 1 {
		t.Errorf("COLOR kept %d revisions (%v); want its current state", len(revs), err)
	}
}
