package contentapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/assistantcms/cms/pkg/edge/cors"
)

// TestCORSPreflightsEveryRoute: with origins allowed, the preflight of
// every /cms route, GraphQL included, is answered, where Gin alone would
// answer OPTIONS with 405; answers carry the origin and keep varying by
// token; without origins OPTIONS reaches Gin as before.
func TestCORSPreflightsEveryRoute(t *testing.T) {
	const page = "https://app.example.com"
	policy, err := cors.New([]string{page})
	if err != nil {
		t.Fatal(err)
	}
	on := newEnv(t, ServiceConfig{CORS: policy})
	off := newEnv(t, ServiceConfig{})
	options := func(e *env, path, origin, method string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodOptions, e.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return response{status: resp.StatusCode, header: resp.Header}
	}
	n := 0
	for _, r := range on.svc.engine.Routes() {
		if !strings.HasPrefix(r.Path, "/cms/") {
			continue
		}
		n++
		path := strings.NewReplacer(":id", "x", "*file", "x").Replace(r.Path)
		if got := options(on, path, page, r.Method); got.status != http.StatusNoContent ||
			got.header.Get("Access-Control-Allow-Origin") != page || !strings.Contains(got.header.Get("Access-Control-Allow-Methods"), r.Method) {
			t.Errorf("preflight of %s %s: %d %v", r.Method, path, got.status, got.header)
		}
		if got := options(on, path, "https://other.example", r.Method); got.status != http.StatusForbidden || got.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s %s from an origin not allowed: %d %v", r.Method, path, got.status, got.header)
		}
		if got := options(off, path, page, r.Method); got.status != http.StatusMethodNotAllowed || got.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s %s without origins allowed: %d %v, want Gin's 405 as before", r.Method, path, got.status, got.header)
		}
	}
	if n < 10 || !slices.ContainsFunc(on.svc.engine.Routes(), func(r gin.RouteInfo) bool { return r.Path == "/cms/graphql" }) {
		t.Fatalf("%d /cms routes, GraphQL among them?", n)
	}

	r := on.get("/cms/handler", "app1", "Origin", page)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != page || r.header.Get("ETag") == "" || r.header.Get("X-Request-Id") == "" ||
		!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Errorf("GET /cms/handler: %d %v", r.status, r.header)
	}
	if vary := strings.Join(r.header.Values("Vary"), ", "); vary != "Origin, Authorization, Authorize" {
		t.Errorf("Vary %q: want the origin and the token", vary)
	}
	if r := off.get("/cms/handler", "app1", "Origin", page); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" ||
		strings.Join(r.header.Values("Vary"), ", ") != "Authorization, Authorize" {
		t.Errorf("GET /cms/handler without origins allowed: %d %v", r.status, r.header)
	}
}
