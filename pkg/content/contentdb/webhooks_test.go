package contentdb

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/edge/egress"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// received is a message a test receiver got.
type received struct {
	path, id, timestamp, signature string
	body                           []byte
	at                             time.Time
}

// receiver is an endpoint on loopback: /ok answers 204, /fail 500 until
// healed, /slow answers only when the request gives up.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	healed atomic.Bool
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.URL.Path, req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"),
			req.Header.Get("webhook-signature"), body, time.Now()})
		r.mu.Unlock()
		switch {
		case req.URL.Path == "/slow":
			<-req.Context().Done()
		case req.URL.Path == "/fail" && !r.healed.Load():
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) messages(path string) []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, m := range r.got {
		if m.path == path {
			out = append(out, m)
		}
	}
	return out
}

// runDeliverer sends the store's outbox until the test ends.
func runDeliverer(t *testing.T, s *DB, cfg webhooks.Config, timeout time.Duration) *webhooks.Deliverer {
	client := egress.New(egress.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Timeout: timeout})
	d := webhooks.NewDeliverer(cfg, s, client, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

func awaitCond(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebhookOutbox: content changes and publishes are written to the
// outbox in their own transactions, a burst of writes as one message,
// sent signed by the Standard Webhooks conventions, retried, then failed,
// logged attempt by attempt, and sent again on request; on both engines.
func TestWebhookOutbox(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			withApp(t, s)
			ctx := contenttest.Acting(t.Context())
			rcv := newReceiver(t)
			w, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: "app", ID: "w1", URL: rcv.URL + "/ok", Topics: []string{webhooks.TopicChanged, webhooks.TopicPublished}})
			if err != nil || !strings.HasPrefix(w.Secret, "whsec_") {
				t.Fatalf("CreateWebhook = %+v, %v", w, err)
			}
			if _, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: "app", ID: "w1", URL: rcv.URL, Topics: []string{webhooks.TopicChanged}}); !errors.Is(err, content.ErrConflict) {
				t.Errorf("a second webhook w1: %v", err)
			}
			if _, err := s.CreateWebhook(t.Context(), webhooks.Webhook{AppID: "app", ID: "w9", URL: rcv.URL, Topics: []string{webhooks.TopicChanged}}); !errors.Is(err, tenancy.ErrNoActor) {
				t.Errorf("a webhook without an actor: %v", err)
			}
			pending := func() []webhooks.Delivery {
				t.Helper()
				ds, err := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app", State: webhooks.Pending})
				if err != nil {
					t.Fatal(err)
				}
				return ds
			}
			// A burst of writes is one message, of the newest revision.
			for _, id := range []string{"a", "b", "c"} {
				if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindEntity, ID: id, Doc: json.RawMessage(`{"entityId":"` + id + `"}`)}); err != nil {
					t.Fatal(err)
				}
			}
			rev, _ := s.Revision(t.Context(), "app")
			ds := pending()
			if len(ds) != 1 || ds[0].Topic != webhooks.TopicChanged || decodeMessage(t, ds[0].Payload).Data.Revision != rev {
				t.Fatalf("pending after three writes: %+v (%s)", ds, ds[0].Payload)
			}

			runDeliverer(t, s, webhooks.Config{Poll: 10 * time.Millisecond, Retry: webhooks.Retry{First: 20 * time.Millisecond, Longest: 40 * time.Millisecond, For: 300 * time.Millisecond}}, 2*time.Second)
			awaitCond(t, "the change delivered", func() bool { return len(rcv.messages("/ok")) == 1 })
			m := rcv.messages("/ok")[0]
			if err := webhooks.Verify(w.Secret, m.id, m.timestamp, m.signature, m.body, time.Now(), time.Minute); err != nil || m.id != ds[0].MessageID() {
				t.Errorf("the message %+v: %v", m, err)
			}
			msg := decodeMessage(t, m.body)
			if msg.Type != webhooks.TopicChanged || msg.Data.AppID != "app" || msg.Data.Revision != rev {
				t.Errorf("the message's body %s: %v", m.body, err)
			}
			awaitCond(t, "the delivery logged", func() bool {
				all, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"})
				return len(all) == 1 && all[0].State == webhooks.Delivered && len(all[0].Log) == 1 && all[0].Log[0].Status == http.StatusNoContent
			})

			// Publishing tells content.published alone, each version.
			if _, err := s.SetPublishing(ctx, "app", true); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpdateRecord(ctx, "app", content.KindEntity, "a", 0, func(r content.Record) (content.Record, error) {
				r.Doc = json.RawMessage(`{"entityId":"a","displayName":"A"}`)
				return r, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Publish(ctx, "app"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Rollback(ctx, "app", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SetPublishing(ctx, "app", false); err != nil {
				t.Fatal(err)
			}
			awaitCond(t, "the publishing messages", func() bool { return len(rcv.messages("/ok")) == 5 })
			var told []string
			for _, m := range rcv.messages("/ok")[1:] {
				msg := decodeMessage(t, m.body)
				told = append(told, msg.Type+"/"+jsonInt(msg.Data.Version))
			}
			if got := strings.Join(told, " "); got != "content.published/1 content.published/2 content.published/1 content.changed/0" {
				t.Errorf("told %s", got)
			}

			// A failing endpoint: retried, then failed, every attempt
			// logged; sent again on request once it works.
			if _, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: "app", ID: "w2", URL: rcv.URL + "/fail", Topics: []string{webhooks.TopicGapsOpened}}); err != nil {
				t.Fatal(err)
			}
			if n, err := s.EnqueueWebhookEvent(t.Context(), "app", webhooks.TopicGapsOpened, []byte(`{"type":"gaps.opened"}`)); err != nil || n != 1 {
				t.Fatalf("EnqueueWebhookEvent = %d, %v", n, err)
			}
			var failed webhooks.Delivery
			awaitCond(t, "the failing delivery failed", func() bool {
				ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app", Webhook: "w2"})
				if len(ds) == 1 && ds[0].State == webhooks.Failed {
					failed = ds[0]
					return true
				}
				return false
			})
			if len(failed.Log) < 2 || failed.Attempts != len(failed.Log) || failed.Log[0].Status != 500 || !strings.Contains(failed.LastError, "HTTP 500: down for maintenance") {
				t.Errorf("the failed delivery %+v", failed)
			}
			if msgs := rcv.messages("/fail"); len(msgs) != failed.Attempts || msgs[0].id != msgs[len(msgs)-1].id {
				t.Errorf("retries were sent as other messages: %+v", msgs)
			}
			rcv.healed.Store(true)
			if _, err := s.Redeliver(ctx, "app", failed.ID); err != nil {
				t.Fatal(err)
			}
			awaitCond(t, "the redelivery", func() bool {
				ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app", Webhook: "w2"})
				return len(ds) == 1 && ds[0].State == webhooks.Delivered && ds[0].Attempts == failed.Attempts+1
			})
			if _, err := s.Redeliver(ctx, "app", 999999); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("redeliver a delivery that does not exist: %v", err)
			}

			// Rotation: both secrets sign for the overlap.
			rotated, err := s.RotateWebhookSecret(ctx, "app", "w1", time.Hour)
			if err != nil || rotated.PreviousSecret != w.Secret || rotated.Secret == w.Secret {
				t.Fatalf("RotateWebhookSecret = %+v, %v", rotated, err)
			}
			if n, err := s.EnqueueWebhookEvent(t.Context(), "app", webhooks.TopicChanged, []byte(`{"type":"content.changed"}`)); err != nil || n != 1 {
				t.Fatalf("EnqueueWebhookEvent = %d, %v", n, err)
			}
			awaitCond(t, "the message after the rotation", func() bool { return len(rcv.messages("/ok")) == 6 })
			m = rcv.messages("/ok")[5]
			for _, secret := range []string{w.Secret, rotated.Secret} {
				if err := webhooks.Verify(secret, m.id, m.timestamp, m.signature, m.body, time.Now(), time.Minute); err != nil {
					t.Errorf("a receiver with one of the two secrets: %v", err)
				}
			}

			if err := s.DeleteWebhook(ctx, "app", "w2"); err != nil {
				t.Fatal(err)
			}
			if ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app", Webhook: "w2"}); len(ds) != 0 {
				t.Errorf("a deleted webhook's deliveries: %+v", ds)
			}
			log, _ := s.AuditLog(t.Context(), content.AuditFilter{AppID: "app", Limit: 100})
			var ops []string
			for _, e := range log {
				if strings.HasPrefix(e.Subject, "webhook/") {
					ops = append(ops, e.Operation)
				}
			}
			if got := strings.Join(ops, " "); got != "deleteWebhook rotateWebhookSecret redeliverWebhook createWebhook createWebhook" {
				t.Errorf("webhook operations audited: %s", got)
			}
			// Retention takes the deliveries done with.
			awaitCond(t, "every delivery done with", func() bool { return len(pending()) == 0 })
			if p, err := s.PruneHistory(t.Context(), time.Now().Add(time.Hour), 1); err != nil || p.Deliveries != 6 {
				t.Errorf("PruneHistory = %+v, %v; want 6 deliveries pruned", p, err)
			}
			if ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"}); len(ds) != 0 {
				t.Errorf("deliveries after pruning: %+v", ds)
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// message is a content topic's message.
type message struct {
	Type      string
	Timestamp time.Time
	Data      struct {
		AppID    string
		Revision int64
		Version  int64
	}
}

func decodeMessage(t *testing.T, body []byte) message {
	t.Helper()
	var m message
	if err := json.Unmarshal(body, &m); err != nil || m.Timestamp.IsZero() {
		t.Fatalf("message %s: %v", body, err)
	}
	return m
}

// TestWebhookSlowEndpointDelaysNoOtherApp: while one app's endpoint holds
// its deliveries until they time out, another app's are delivered at
// once.
func TestWebhookSlowEndpointDelaysNoOtherApp(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			withApps(t, s, "slow", "fast")
			ctx := contenttest.Acting(t.Context())
			rcv := newReceiver(t)
			for _, w := range []webhooks.Webhook{
				{AppID: "slow", ID: "s", URL: rcv.URL + "/slow", Topics: []string{webhooks.TopicGapsOpened}},
				{AppID: "fast", ID: "f", URL: rcv.URL + "/ok", Topics: []string{webhooks.TopicGapsOpened}},
			} {
				if _, err := s.CreateWebhook(ctx, w); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 {
				if _, err := s.EnqueueWebhookEvent(t.Context(), "slow", webhooks.TopicGapsOpened, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			const timeout = 5 * time.Second
			runDeliverer(t, s, webhooks.Config{Workers: 4, PerApp: 2, Poll: 10 * time.Millisecond}, timeout)
			awaitCond(t, "the slow app's deliveries under way", func() bool { return len(rcv.messages("/slow")) == 2 })
			queued := time.Now()
			if _, err := s.EnqueueWebhookEvent(t.Context(), "fast", webhooks.TopicGapsOpened, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			awaitCond(t, "the fast app's delivery", func() bool { return len(rcv.messages("/ok")) == 1 })
			if took := rcv.messages("/ok")[0].at.Sub(queued); took > timeout/2 {
				t.Errorf("the fast app's message took %v behind the slow app's", took)
			}
			if n := len(rcv.messages("/slow")); n != 2 {
				t.Errorf("the slow app has %d deliveries under way, more than its 2", n)
			}
		})
	}
}

// withChangedHook opens a store of the backend with app "app" and its
// content.changed webhook "w", and answers it with an acting context.
func withChangedHook(t *testing.T, b backend) (*DB, context.Context) {
	t.Helper()
	s := openDB(t, b.newDB(t))
	withApp(t, s)
	ctx := contenttest.Acting(t.Context())
	if _, err := s.CreateWebhook(ctx, webhooks.Webhook{AppID: "app", ID: "w", URL: "https://example.com/hook", Topics: []string{webhooks.TopicChanged}}); err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

// TestWebhookChangeWhileSending: a change made while a content.changed
// message is being sent is a message of its own, not joined to the one
// already read; on both engines.
func TestWebhookChangeWhileSending(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s, ctx := withChangedHook(t, b)
			write := func(id string) int64 {
				t.Helper()
				if _, err := s.CreateRecord(ctx, content.Record{AppID: "app", Kind: content.KindEntity, ID: id, Doc: json.RawMessage(`{"entityId":"` + id + `"}`)}); err != nil {
					t.Fatal(err)
				}
				rev, _ := s.Revision(t.Context(), "app")
				return rev
			}
			first := write("a")
			claimed, err := s.ClaimDeliveries(t.Context(), time.Now(), time.Minute, 10, nil)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("ClaimDeliveries = %+v, %v", claimed, err)
			}
			second := write("b")
			ds, err := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"})
			if err != nil || len(ds) != 2 {
				t.Fatalf("deliveries after a change while one is sent: %+v, %v", ds, err)
			}
			if got := decodeMessage(t, ds[1].Payload).Data.Revision; got != first {
				t.Errorf("the message being sent now tells revision %d, not %d", got, first)
			}
			if got := decodeMessage(t, ds[0].Payload).Data.Revision; got != second {
				t.Errorf("the new message tells revision %d, not %d", got, second)
			}
		})
	}
}

// TestWebhookImportTellsChangesOnly: an import that leaves an app as it
// was queues nothing for its webhooks, and one that changes it one
// message; a message queued before keeps the revision it told.
func TestWebhookImportTellsChangesOnly(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s, ctx := withChangedHook(t, b)
			rec := content.Record{AppID: "app", Kind: content.KindEntity, ID: "E", Doc: json.RawMessage(`{"entityId":"E"}`)}
			if _, err := s.CreateRecord(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rev, _ := s.Revision(t.Context(), "app")
			if _, err := s.Import(ctx, &content.Bundle{Records: []content.Record{rec}}, nil); err != nil {
				t.Fatal(err)
			}
			ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"})
			if len(ds) != 1 || decodeMessage(t, ds[0].Payload).Data.Revision != rev {
				t.Fatalf("after an import of what is there: %d messages, the first telling %s", len(ds), ds[0].Payload)
			}
			// Sent, then an import of nothing new: nothing more.
			if _, err := s.ClaimDeliveries(t.Context(), time.Now(), time.Minute, 10, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, &content.Bundle{Records: []content.Record{rec}}, nil); err != nil {
				t.Fatal(err)
			}
			if ds, _ := s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"}); len(ds) != 1 {
				t.Errorf("an import of what is there queued %d messages", len(ds)-1)
			}
			rec.Doc = json.RawMessage(`{"entityId":"E","displayName":"E"}`)
			if _, err := s.Import(ctx, &content.Bundle{Records: []content.Record{rec}}, nil); err != nil {
				t.Fatal(err)
			}
			rev, _ = s.Revision(t.Context(), "app")
			ds, _ = s.Deliveries(t.Context(), webhooks.DeliveryFilter{App: "app"})
			if len(ds) != 2 || decodeMessage(t, ds[0].Payload).Data.Revision != rev {
				t.Errorf("after an import that changed the app: %d messages", len(ds))
			}
		})
	}
}
