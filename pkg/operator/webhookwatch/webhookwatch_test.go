package webhookwatch

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// The content database is real (SQLite); the ClickHouse reads and the
// inbox are stand-ins, tested where they are built.

func openStore(t *testing.T) *contentdb.DB {
	t.Helper()
	s, err := contentdb.OpenDB(t.Context(), filepath.Join(t.TempDir(), "cms.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := contenttest.Acting(t.Context())
	now := time.Now()
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApp(ctx, tenancy.App{ID: "app", OrganizationID: "org", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return s
}

func told(t *testing.T, s *contentdb.DB, webhook string) []string {
	t.Helper()
	ds, err := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app", Webhook: webhook})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ds) - 1; i >= 0; i-- {
		out = append(out, string(ds[i].Payload))
	}
	return out
}

func TestErrorRate(t *testing.T) {
	s := openStore(t)
	ctx := contenttest.Acting(t.Context())
	for _, w := range []webhooks.Webhook{
		{AppID: "app", ID: "low", URL: "https://example.com/a", Topics: []string{webhooks.TopicErrorRate}, ErrorRate: 5},
		{AppID: "app", ID: "high", URL: "https://example.com/b", Topics: []string{webhooks.TopicErrorRate}, ErrorRate: 100},
		{AppID: "app", ID: "other", URL: "https://example.com/c", Topics: []string{webhooks.TopicPublished}},
	} {
		if _, err := s.CreateWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	errors := uint64(10)
	var asked []string
	counter := func(_ context.Context, apps []string, since time.Time) (map[string]uint64, error) {
		asked = apps
		return map[string]uint64{"app": errors}, nil
	}
	wakes := 0
	w := New(Config{}, s, counter, nil, func() { wakes++ }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Date(2026, 12, 6, 15, 0, 10, 0, time.UTC)
	w.now = func() time.Time { return clock }
	check := func() {
		t.Helper()
		if err := w.CheckErrors(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	check()
	if got := told(t, s, "low"); len(got) != 1 || !strings.Contains(got[0], `"errors":10,"perMinute":5`) || !strings.Contains(got[0], `"type":"errors.rate"`) {
		t.Errorf("the endpoint whose rate was passed was told %v", got)
	}
	if got := told(t, s, "high"); len(got) != 0 {
		t.Errorf("the endpoint whose rate was not passed was told %v", got)
	}
	if strings.Join(asked, ",") != "app" || wakes != 1 {
		t.Errorf("asked for %v, woke the deliverer %d times", asked, wakes)
	}
	clock = clock.Add(30 * time.Second) // the same minute
	check()
	clock = clock.Add(time.Minute)
	errors = 3
	check()
	if got := told(t, s, "low"); len(got) != 1 {
		t.Errorf("told twice in a minute, or below the rate: %v", got)
	}
	errors = 6
	check()
	if got := told(t, s, "low"); len(got) != 2 {
		t.Errorf("not told in the next minute: %v", got)
	}
}

type inboxes struct{ groups []gapinbox.Group }

func (f *inboxes) Answer(_ context.Context, r gapinbox.Request) (gapinbox.Inbox, error) {
	return gapinbox.Inbox{AppID: r.App, Groups: f.groups}, nil
}

func TestGapsOpened(t *testing.T) {
	s := openStore(t)
	ctx := contenttest.Acting(t.Context())
	hook, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: "app", ID: "gaps", URL: "https://example.com/g", Topics: []string{webhooks.TopicGapsOpened}})
	if err != nil {
		t.Fatal(err)
	}
	before, after := hook.CreatedAt.Add(-time.Hour), hook.CreatedAt.Add(time.Minute)
	in := &inboxes{groups: []gapinbox.Group{
		{ID: "old", Representative: "opening hours", FirstSeen: before, Users: 9},
		{ID: "new", Representative: "do you sell skateboards", FirstSeen: after, Users: 3, Asked: 4},
		{ID: "back", Representative: "gift cards", FirstSeen: before, Reopened: true, Decision: &gapinbox.Decision{GroupID: "back", DecidedAt: before}},
	}}
	w := New(Config{}, s, nil, in, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.CheckGaps(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := told(t, s, "gaps")
	if len(got) != 1 {
		t.Fatalf("told %v", got)
	}
	var m struct {
		Type string
		Data struct {
			Groups []struct {
				ID       string
				Reopened bool
			}
		}
	}
	if err := json.Unmarshal([]byte(got[0]), &m); err != nil || m.Type != webhooks.TopicGapsOpened || len(m.Data.Groups) != 2 ||
		m.Data.Groups[0].ID != "new" || m.Data.Groups[1].ID != "back" || !m.Data.Groups[1].Reopened {
		t.Errorf("gaps.opened %s: %v", got[0], err)
	}
	if err := w.CheckGaps(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := told(t, s, "gaps"); len(got) != 1 {
		t.Errorf("told again of the same groups: %v", got)
	}
	in.groups = append(in.groups, gapinbox.Group{ID: "newer", Representative: "tandem hire", FirstSeen: after})
	if err := w.CheckGaps(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := told(t, s, "gaps"); len(got) != 2 || !strings.Contains(got[1], `"id":"newer"`) || strings.Contains(got[1], `"id":"new"`) {
		t.Errorf("told of a new group: %v", got)
	}
}
