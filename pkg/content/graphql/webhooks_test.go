package graphql

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestWebhookFields: authors register, list, change, rotate and remove
// their app's webhooks and read and replay its delivery log; a URL that
// reaches loopback is refused unless allowed, and runtime tokens can do
// none of it.
func TestWebhookFields(t *testing.T) {
	guarded := newEnv(t, Limits{}, nil)
	if a := guarded.post("app1", `mutation { createWebhook(id: "w", url: "http://127.0.0.1:9/hook", topics: [CONTENT_CHANGED]) { secret } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@url" || !strings.Contains(a.raw, "loopback") {
		t.Errorf("a loopback URL: %s", a.raw)
	}
	if a := guarded.post("app1", `mutation { createWebhook(id: "w", url: "http://169.254.169.254/latest", topics: [CONTENT_CHANGED]) { secret } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@url" {
		t.Errorf("a metadata URL: %s", a.raw)
	}

	e := newEnv(t, Limits{WebhookAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	create := `mutation { createWebhook(id: "w", url: "http://127.0.0.1:9/hook", topics: [CONTENT_CHANGED, ERRORS_RATE], errorRate: 30) { secret webhook { id url topics errorRate } } }`
	if a := e.post("runtime", create, nil); len(a.Errors) == 0 || a.Data["createWebhook"] != nil {
		t.Errorf("a runtime token registers a webhook: %s", a.raw)
	}
	if a := e.post("runtime", `{ webhooks { id } }`, nil); strings.Join(a.codes(), ",") != "INSUFFICIENT_SCOPE@" {
		t.Errorf("a runtime token lists webhooks: %s", a.raw)
	}
	a := e.post("app1", create, nil)
	got := jsonOf(a.Data)
	if len(a.Errors) > 0 || !strings.Contains(got, `"secret":"whsec_`) || !strings.Contains(got, `"topics":["CONTENT_CHANGED","ERRORS_RATE"]`) {
		t.Fatalf("createWebhook: %s", a.raw)
	}
	if a := e.post("app1", create, nil); strings.Join(a.codes(), ",") != "ALREADY_EXISTS@id" {
		t.Errorf("createWebhook again: %s", a.raw)
	}
	if a := e.post("app1", `mutation { createWebhook(id: "bad id", url: "http://127.0.0.1:9/", topics: [CONTENT_CHANGED], errorRate: -1) { secret } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@id,BAD_USER_INPUT@errorRate" {
		t.Errorf("a bad id and error rate: %s", a.raw)
	}
	if a := e.post("app1", `mutation { updateWebhook(id: "w", topics: [CONTENT_PUBLISHED]) { topics url } }`, nil); jsonOf(a.Data) != `{"updateWebhook":{"topics":["CONTENT_PUBLISHED"],"url":"http://127.0.0.1:9/hook"}}` {
		t.Errorf("updateWebhook: %s", a.raw)
	}
	if a := e.post("app1", `mutation { rotateWebhookSecret(id: "w", overlapSeconds: 3600) { secret webhook { previousUntil } } }`, nil); len(a.Errors) > 0 || strings.Contains(jsonOf(a.Data), `"previousUntil":null`) {
		t.Errorf("rotateWebhookSecret: %s", a.raw)
	}
	if a := e.post("app1", `mutation { rotateWebhookSecret(id: "w", overlapSeconds: 9999999) { secret } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@overlapSeconds" {
		t.Errorf("a rotation's overlap past a week: %s", a.raw)
	}
	if _, err := e.store.EnqueueWebhookEvent(t.Context(), "app-1", webhooks.TopicPublished, []byte(`{"type":"content.published"}`)); err != nil {
		t.Fatal(err)
	}
	a = e.post("app1", `{ webhookDeliveries(webhookId: "w") { id messageId topic state payload attempts { attempt } } }`, nil)
	ds, _ := a.Data["webhookDeliveries"].([]any)
	if len(ds) != 1 || !strings.Contains(jsonOf(ds[0]), `"state":"PENDING"`) || !strings.Contains(jsonOf(ds[0]), `"topic":"CONTENT_PUBLISHED"`) {
		t.Fatalf("webhookDeliveries: %s", a.raw)
	}
	id := ds[0].(map[string]any)["id"].(string)
	if a := e.post("app1", `mutation { redeliverWebhook(deliveryId: "`+id+`") { id state } }`, nil); len(a.Errors) > 0 {
		t.Errorf("redeliverWebhook: %s", a.raw)
	}
	if a := e.post("app1", `mutation { redeliverWebhook(deliveryId: "424242") { id } }`, nil); strings.Join(a.codes(), ",") != "NOT_FOUND@id" {
		t.Errorf("redeliver a delivery that does not exist: %s", a.raw)
	}
	if a := e.post("app1", `mutation { deleteWebhook(id: "w") }`, nil); jsonOf(a.Data) != `{"deleteWebhook":true}` {
		t.Errorf("deleteWebhook: %s", a.raw)
	}
	if a := e.post("app1", `{ webhooks { id } }`, nil); jsonOf(a.Data) != `{"webhooks":[]}` {
		t.Errorf("webhooks after the deletion: %s", a.raw)
	}
}
