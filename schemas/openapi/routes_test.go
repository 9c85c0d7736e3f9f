package openapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/edge/gateway"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/operator/analyticspage"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/operator/statuspage"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/livetail/livehttp"

	"github.com/assistantcms/cms/schemas/openapi"
)

// registered returns every route the services register, by route, with
// the service that answers it, read from the services' own code: the
// content API's Gin engine as contentapi builds it, the operator pages
// the api mounts on it, the endpoints
// httpserve mounts on every service, and ingest's mux probed at the
// documented paths (a ServeMux cannot list its patterns).
func registered(t *testing.T, documented map[string]operation) map[string]string {
	t.Helper()
	store, err := contentdb.OpenDB(t.Context(), filepath.Join(t.TempDir(), "cms.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	svc, err := contentapi.NewService(contentapi.ServiceConfig{}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Without CORS the service's handler is the engine itself.
	engine, ok := svc.Handler().(*gin.Engine)
	if !ok {
		t.Fatalf("the content API's handler is a %T, not the Gin engine", svc.Handler())
	}
	routes := map[string]string{}
	for _, r := range engine.Routes() {
		routes[route(r.Method, r.Path)] = "api"
	}
	// The operator pages, which the api's command mounts beside the
	// content routes (contentapi.ServiceConfig.Pages); live_test.go sees
	// them answered by the running api.
	for _, path := range []string{statuspage.Path, statuspage.DataPath, analyticspage.Path, analyticspage.DataPath} {
		routes[route(http.MethodGet, path)] = "api"
	}
	// The live view of events, which the api's command mounts too
	// (ServiceConfig.Authorized, and its page's files as Pages).
	routes[route(http.MethodGet, livehttp.Path)] = "api"
	for _, path := range []string{livehttp.ScriptPath, livehttp.StylePath} {
		if key, ok := documentedRoute(documented, http.MethodGet, path); ok {
			routes[key] = "api"
		} else {
			routes[route(http.MethodGet, path)] = "api"
		}
	}
	// The authors' analytics, mounted by the api's command too.
	for _, path := range []string{analyticspage.AuthorsPath, analyticspage.AppDataPath, gapinbox.Path, analyticspage.SessionsPath,
		analyticspage.ConversationPath, analyticspage.SamplesPath, analyticspage.AuthorsScriptPath, analyticspage.AuthorsStylePath} {
		routes[route(http.MethodGet, path)] = "api"
	}
	httpserve.Mount(func(path string, _ http.Handler) { routes[route(http.MethodGet, path)] = "every service" },
		prometheus.NewRegistry(), httpserve.NewChecker())

	mux := http.NewServeMux()
	(&ingest.Handler{}).Register(mux)
	for key, op := range documented {
		if _, pattern := mux.Handler(newRequest(t, op.method, "http://cms"+concrete(op.path))); pattern != "" {
			routes[key] = "ingest"
		}
	}
	return routes
}

// TestEveryRouteDocumented compares the routes the services register with
// the document's operations, both ways, and checks that the gateway sends
// each documented path to the service that registers it.
func TestEveryRouteDocumented(t *testing.T) {
	_, m, err := load(openapi.Bundled(), "")
	if err != nil {
		t.Fatal(err)
	}
	documented := operations(m)
	routes := registered(t, documented)
	if got := missing(routes, documented); len(got) > 0 {
		t.Errorf("registered but not documented in openapi.yaml: %v", got)
	}
	if got := missing(documented, routes); len(got) > 0 {
		t.Errorf("documented but registered by no service: %v", got)
	}
	for key, op := range documented {
		toIngest := gateway.IsEventsPath(concrete(op.path))
		if toIngest != (routes[key] == "ingest") {
			t.Errorf("%s: the gateway sends it to ingest: %v; ingest registers it: %v", key, toIngest, routes[key] == "ingest")
		}
		if toIngest != slices.Contains(op.tags, "events") {
			t.Errorf("%s: tagged %v, but the gateway sends it to ingest: %v", key, op.tags, toIngest)
		}
	}
	// The probe found ingest's routes, so an empty set would mean a broken
	// probe rather than a complete document.
	if n := len(slices.Collect(func(yield func(string) bool) {
		for k, s := range routes {
			if s == "ingest" && !yield(k) {
				return
			}
		}
	})); n == 0 {
		t.Error("no documented path reaches ingest's mux")
	}
}
