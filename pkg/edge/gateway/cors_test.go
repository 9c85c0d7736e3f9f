package gateway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/assistantcms/cms/pkg/edge/cors"
)

// corsUpstream is an upstream with a policy of its own that allows any
// origin (the product's), counting what reaches it and whether it came
// with an Origin.
func corsUpstream(t *testing.T, name string) (url string, hits, origins *atomic.Int64) {
	t.Helper()
	hits, origins = new(atomic.Int64), new(atomic.Int64)
	anyOrigin, err := cors.New([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(anyOrigin.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Origin") != "" {
			origins.Add(1)
		}
		h := w.Header()
		h.Set("X-Upstream", name)
		h.Add("Vary", "Authorization, Authorize")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "{}")
	})))
	t.Cleanup(srv.Close)
	return srv.URL, hits, origins
}

// TestCORS: with origins allowed, the gateway's policy is the one the
// browser sees, its headers once: the upstreams, which allow any origin,
// never see an Origin and add nothing. Without, it passes everything
// through, and the upstreams' policy is the one seen.
func TestCORS(t *testing.T) {
	const page, other = "http://127.0.0.1:3000", "https://other.example"
	ingestURL, ingestHits, ingestOrigins := corsUpstream(t, "ingest")
	apiURL, apiHits, apiOrigins := corsUpstream(t, "api")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	policy, err := cors.New([]string{page})
	if err != nil {
		t.Fatal(err)
	}
	gateway := func(api string, p *cors.Policy) string {
		return front(t, Config{Ingest: ingestURL, API: api, CORS: p})
	}
	on, off, down := gateway(apiURL, policy), gateway(apiURL, nil), gateway(closed, policy)
	preflight := func(origin string) []string {
		return []string{"Origin", origin, "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization,content-type"}
	}
	type want struct {
		status      int
		upstream    string // "" when the gateway answered itself
		allowOrigin []string
		methods     string
		expose      string
		vary        []string
	}
	for _, tc := range []struct {
		name    string
		gateway string
		method  string
		path    string
		headers []string
		want    want
	}{
		{"preflight of events answered here", on, http.MethodOptions, "/cms/app/events", preflight(page),
			want{status: 204, allowOrigin: []string{page}, methods: cors.AllowMethods,
				vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}}},
		{"preflight of content answered here", on, http.MethodOptions, "/cms/graphql", preflight(page),
			want{status: 204, allowOrigin: []string{page}, methods: cors.AllowMethods,
				vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}}},
		{"preflight from an origin not allowed", on, http.MethodOptions, "/cms/handler", preflight(other),
			want{status: 403, vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}}},
		{"events: the gateway's headers, once", on, http.MethodPut, "/cms/app/events", []string{"Origin", page},
			want{status: 200, upstream: "ingest", allowOrigin: []string{page}, expose: cors.ExposeHeaders, vary: []string{"Origin", "Origin", "Authorization, Authorize"}}},
		{"content: the gateway's headers, once", on, http.MethodGet, "/cms/handler", []string{"Origin", page},
			want{status: 200, upstream: "api", allowOrigin: []string{page}, expose: cors.ExposeHeaders, vary: []string{"Origin", "Origin", "Authorization, Authorize"}}},
		{"an upstream allowing what the gateway does not", on, http.MethodGet, "/cms/handler", []string{"Origin", other},
			want{status: 200, upstream: "api", vary: []string{"Origin", "Origin", "Authorization, Authorize"}}},
		{"an unreachable upstream's 503 is readable", down, http.MethodGet, "/cms/handler", []string{"Origin", page},
			want{status: 503, allowOrigin: []string{page}, expose: cors.ExposeHeaders, vary: []string{"Origin"}}},
		{"not configured: the upstream answers the preflight", off, http.MethodOptions, "/cms/app/events", preflight(page),
			want{status: 204, methods: cors.AllowMethods, allowOrigin: []string{page},
				vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}}},
		{"not configured: the upstream's headers pass through", off, http.MethodGet, "/cms/handler", []string{"Origin", other},
			want{status: 200, upstream: "api", allowOrigin: []string{other}, expose: cors.ExposeHeaders, vary: []string{"Origin", "Authorization, Authorize"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, originsBefore := ingestHits.Load()+apiHits.Load(), ingestOrigins.Load()+apiOrigins.Load()
			r := do(t, tc.method, tc.gateway+tc.path, "", nil, tc.headers...)
			if sent := ingestOrigins.Load()+apiOrigins.Load() > originsBefore; sent != (tc.gateway == off && tc.want.upstream != "") {
				t.Errorf("an upstream got the Origin: %v", sent)
			}
			h := r.header
			if r.status != tc.want.status || h.Get("X-Upstream") != tc.want.upstream {
				t.Fatalf("%d from %q, want %d from %q: %s", r.status, h.Get("X-Upstream"), tc.want.status, tc.want.upstream, r.body)
			}
			if reached := ingestHits.Load()+apiHits.Load() > before; reached != (tc.want.upstream != "") {
				t.Errorf("an upstream reached: %v", reached)
			}
			if got := h.Values("Access-Control-Allow-Origin"); !reflect.DeepEqual(got, tc.want.allowOrigin) && (len(got) > 0 || len(tc.want.allowOrigin) > 0) {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.want.allowOrigin)
			}
			if got := strings.Join(h.Values("Access-Control-Allow-Methods"), " | "); got != tc.want.methods {
				t.Errorf("Access-Control-Allow-Methods %q, want %q", got, tc.want.methods)
			}
			if got := strings.Join(h.Values("Access-Control-Expose-Headers"), " | "); got != tc.want.expose {
				t.Errorf("Access-Control-Expose-Headers %q, want %q", got, tc.want.expose)
			}
			if got := h.Values("Vary"); !reflect.DeepEqual(got, tc.want.vary) {
				t.Errorf("Vary %q, want %q", got, tc.want.vary)
			}
			if tc.want.status == 403 && !strings.Contains(r.body, `"httpStatus":403`) {
				t.Errorf("body %s, want the JSON error shape", r.body)
			}
		})
	}
}
