package contentapi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// watchingStore tells the service of changes when the test says so, as a
// store shared by several replicas does when another replica writes.
type watchingStore struct {
	*contentdb.DB
	changes chan string
	watched chan struct{} // closed when WatchRevisions returns
}

func (w *watchingStore) WatchRevisions(ctx context.Context, changed func(appID string), _ func(error)) error {
	defer close(w.watched)
	for {
		select {
		case <-ctx.Done():
			return nil
		case app := <-w.changes:
			changed(app)
		}
	}
}

func TestServeFollowsChangesAnotherReplicaAnnounces(t *testing.T) {
	store, tokens := fixture.Open(t, fixtureBundle, map[string]tenancy.Token{"app1": {OrganizationID: "org-1", AppID: "app-1"}})
	ws := &watchingStore{DB: store, changes: make(chan string), watched: make(chan struct{})}
	// An hour between revision checks: only the announcement can show the
	// change within the test.
	svc, err := NewService(ServiceConfig{API: Config{RefreshInterval: time.Hour}}, ws, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, ln) }()

	get := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/cms/entity/COLOR", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["app1"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := get(); !strings.Contains(body, "crimson") {
		t.Fatalf("before the change: %s", body)
	}
	f, err := bundle.Read(strings.NewReader(`{"entities":[{"appId":"app-1","entityId":"COLOR","values":[{"name":"blue"}]}]}`), bundle.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(contenttest.Acting(context.Background()), &f.Bundle, nil); err != nil {
		t.Fatal(err)
	}
	if body := get(); !strings.Contains(body, "crimson") {
		t.Fatalf("the change showed before it was announced; the test cannot tell the watcher worked: %s", body)
	}
	ws.changes <- "app-1" // received: the service is invalidating the app
	deadline := time.Now().Add(5 * time.Second)
	for body := get(); !strings.Contains(body, "blue"); body = get() {
		if time.Now().After(deadline) {
			t.Fatalf("the announced change did not show within 5s: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	select {
	case <-ws.watched:
	default:
		t.Error("Serve returned while the watcher still ran")
	}
}

func TestHTTPLimits(t *testing.T) {
	store, _ := fixture.Open(t, fixtureBundle, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	configured := httpserve.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 4096}
	for _, tc := range []struct {
		name      string
		set, want httpserve.Limits
	}{
		{"defaults", httpserve.Limits{}, httpserve.DefaultLimits()},
		{"configured", configured, configured},
	} {
		svc, err := NewService(ServiceConfig{HTTP: tc.set}, store, log)
		if err != nil {
			t.Fatal(err)
		}
		s := svc.server
		if got := httpserve.LimitsOf(s); got != tc.want {
			t.Errorf("%s: server limits %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
