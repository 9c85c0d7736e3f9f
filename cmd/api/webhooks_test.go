package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/pkg/content/webhooks"
)

// TestWebhooksSurviveAKill registers a webhook through GraphQL, publishes
// five versions while the receiver is down, kills the api with SIGKILL
// while their deliveries are being retried, and starts it again on the
// same database: once the receiver is back, each version's message
// arrives, signed with the secret createWebhook answered, and the
// delivery log shows the attempts. A webhook URL on loopback is refused
// without WEBHOOK_ALLOW_NETS.
func TestWebhooksSurviveAKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	db := filepath.Join(dir, "cms.db")
	runAdmin(ctx, t, bin, db, "import", "../../deploy/demo/content.yaml")
	token := runAdmin(ctx, t, bin, db, "demo", "--quiet", "--management")

	var healthy atomic.Bool
	var mu sync.Mutex
	got := map[string]string{} // webhook-id -> body, of messages answered 2xx
	var attempts atomic.Int32
	var secret atomic.Value
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		attempts.Add(1)
		if !healthy.Load() {
			http.Error(w, "receiver down", http.StatusServiceUnavailable)
			return
		}
		s, _ := secret.Load().(string)
		if err := webhooks.Verify(s, r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got[r.Header.Get("webhook-id")] = string(body)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	start := func(name string, extra ...string) (string, *childproc.Proc) {
		t.Helper()
		port, err := devbroker.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(append(os.Environ(), "CONTENT_DB="+db, "API_ADDR="+base[len("http://"):], "RATE_LIMIT_RPS=0",
			"WEBHOOK_POLL=50ms", "WEBHOOK_RETRY_FIRST=100ms", "WEBHOOK_RETRY_LONGEST=200ms", "WEBHOOK_TIMEOUT=1s"), extra...)
		return base, startProcess(ctx, t, name, cmd, base+"/readyz")
	}
	gql := func(base, query string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cms/graphql", strings.NewReader(`{"query":`+strconv.Quote(query)+`}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Data   map[string]any
			Errors []map[string]any
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if len(out.Errors) > 0 {
			out.Data = map[string]any{"errors": out.Errors}
		}
		return out.Data
	}
	register := `mutation { createWebhook(id: "ci", url: "` + rcv.URL + `/hook", topics: [CONTENT_PUBLISHED]) { secret webhook { id } } }`

	// Without the operator's leave, loopback is refused.
	guarded, guardedProc := start("api without WEBHOOK_ALLOW_NETS")
	if out := gql(guarded, register); !strings.Contains(fmt.Sprint(out), "loopback") {
		t.Errorf("a loopback webhook registered without WEBHOOK_ALLOW_NETS: %v", out)
	}
	if err := guardedProc.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatal(err)
	}

	first, proc := start("api", "WEBHOOK_ALLOW_NETS=127.0.0.1")
	out := gql(first, register)
	created, _ := out["createWebhook"].(map[string]any)
	s, _ := created["secret"].(string)
	if !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("createWebhook: %v", out)
	}
	secret.Store(s)
	gql(first, `mutation { setPublishing(on: true) { live } }`)
	for i := range 4 {
		gql(first, fmt.Sprintf(`mutation { addEntity(entity: {entityId: "KILL_%d"}) { entityId } }`, i))
		if out := gql(first, `mutation { publish { published } }`); fmt.Sprint(out) != "map[publish:map[published:true]]" {
			t.Fatalf("publish: %v", out)
		}
	}
	waitUntil(t, 30*time.Second, "retries under way", func() bool { return attempts.Load() >= 8 })
	if err := proc.Stop(syscall.SIGKILL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	healthy.Store(true)
	second, _ := start("api restarted", "WEBHOOK_ALLOW_NETS=127.0.0.1")
	waitUntil(t, 60*time.Second, "every version's message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 5
	})
	var versions []string
	mu.Lock()
	for _, body := range got {
		var m struct {
			Type string
			Data struct{ Version int }
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil || m.Type != webhooks.TopicPublished {
			t.Errorf("message %s: %v", body, err)
		}
		versions = append(versions, strconv.Itoa(m.Data.Version))
	}
	mu.Unlock()
	if joined := strings.Join(slices.Sorted(slices.Values(versions)), ","); joined != "1,2,3,4,5" {
		t.Errorf("versions told: %s", joined)
	}
	log := gql(second, `{ webhookDeliveries(webhookId: "ci") { state attempts { status } } }`)
	ds, _ := log["webhookDeliveries"].([]any)
	retried := 0
	for _, d := range ds {
		d := d.(map[string]any)
		as := d["attempts"].([]any)
		if d["state"] != "DELIVERED" || len(as) == 0 || as[len(as)-1].(map[string]any)["status"] != float64(204) {
			t.Errorf("delivery %v", d)
		}
		if len(as) > 1 && as[0].(map[string]any)["status"] == float64(503) {
			retried++
		}
	}
	if len(ds) != 5 || retried == 0 {
		t.Errorf("the delivery log: %d deliveries, %d retried after 503: %v", len(ds), retried, log)
	}
}
