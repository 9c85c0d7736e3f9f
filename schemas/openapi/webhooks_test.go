package openapi_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pb33f/libopenapi-validator/schema_validation"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/operator/webhookwatch"
	"github.com/assistantcms/cms/pkg/tenancy"
)

type inboxes struct{}

func (inboxes) Answer(_ context.Context, r gapinbox.Request) (gapinbox.Inbox, error) {
	return gapinbox.Inbox{AppID: r.App, Groups: []gapinbox.Group{{ID: "g1", Representative: "do you sell skateboards", Users: 3, Asked: 4,
		FirstSeen: time.Now().Add(time.Hour)}}}, nil
}

// TestWebhookMessagesMatchSchemas makes a message of each topic the way
// the service does (the database's trigger for the content topics, the
// watcher for the others) and validates each against the schema the
// document gives its topic.
func TestWebhookMessagesMatchSchemas(t *testing.T) {
	spec, err := os.ReadFile("openapi.bundled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, model, err := load(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := contentdb.OpenDB(t.Context(), filepath.Join(t.TempDir(), "cms.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := contenttest.Acting(t.Context())
	now := time.Now()
	if err := s.CreateOrganization(ctx, tenancy.Organization{ID: "org", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"draft", "published"} {
		if err := s.CreateApp(ctx, tenancy.App{ID: app, OrganizationID: "org", CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: app, ID: "all", URL: "https://example.com/hook", Topics: webhooks.Topics()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateRecord(ctx, content.Record{AppID: "draft", Kind: content.KindEntity, ID: "E", Doc: []byte(`{"entityId":"E"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPublishing(ctx, "published", true); err != nil {
		t.Fatal(err)
	}
	w := webhookwatch.New(webhookwatch.Config{}, s, func(context.Context, []string, time.Time) (map[string]uint64, error) {
		return map[string]uint64{"draft": 7}, nil
	}, inboxes{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.CheckErrors(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.CheckGaps(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sv := schema_validation.NewSchemaValidator()
	for _, app := range []string{"draft", "published"} {
		ds, err := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: app})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			item, ok := model.Webhooks.Get(d.Topic)
			if !ok || item.Post == nil {
				t.Errorf("the document has no webhook %s", d.Topic)
				continue
			}
			schema := item.Post.RequestBody.Content.GetOrZero("application/json").Schema.Schema()
			if ok, errs := sv.ValidateSchemaBytes(schema, d.Payload); !ok {
				t.Errorf("%s %s: %s", d.Topic, d.Payload, describe(errs))
			}
			seen[d.Topic] = true
		}
	}
	// The schemas hold: a message missing what its topic tells fails.
	item, _ := model.Webhooks.Get(webhooks.TopicPublished)
	if ok, _ := sv.ValidateSchemaBytes(item.Post.RequestBody.Content.GetOrZero("application/json").Schema.Schema(),
		[]byte(`{"type":"content.published","timestamp":"2026-12-06T15:00:00Z","data":{"appId":"a"}}`)); ok {
		t.Error("a content.published message without its version validated")
	}
	for _, topic := range webhooks.Topics() {
		if !seen[topic] {
			t.Errorf("no message of %s was made", topic)
		}
	}
}
