package cors

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

func TestParseOrigin(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "https://app.example.com", want: "https://app.example.com"},
		{in: "HTTPS://App.Example.COM", want: "https://app.example.com"},
		{in: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "https://app.example.com:443", want: "https://app.example.com"},
		{in: "http://app.example.com:80", want: "http://app.example.com"},
		{in: "https://app.example.com:80", want: "https://app.example.com:80"},
		{in: "http://[::1]:3000", want: "http://[::1]:3000"},
		{in: "http://[::1]", want: "http://[::1]"},
		{in: "http://localhost:08080", want: "http://localhost:8080"},
		{in: "https://app.example.com/", err: `a path ("/") is not part of an origin`},
		{in: "https://app.example.com/chat", err: `a path ("/chat")`},
		{in: "https://app.example.com?x=1", err: "a query"},
		{in: "https://app.example.com#top", err: "a fragment"},
		{in: "app.example.com", err: "no scheme"},
		{in: "app.example.com:8080", err: "no // after the scheme"},
		{in: "ftp://app.example.com", err: "the scheme must be http or https"},
		{in: "https://user@app.example.com", err: "user information"},
		{in: "https://", err: "no host"},
		{in: "https://:8080", err: "no host"},
		{in: "https://app.example.com:70000", err: `port "70000" is not in 1..65535`},
		{in: "https://app.example.com:0", err: `port "0"`},
		{in: "https://*.example.com", err: "wildcards are not supported"},
		{in: "https://bücher.example", err: "punycode"},
		{in: "https://app.example.com:x", err: "want scheme://host[:port]"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseOrigin(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `"`+tc.in+`"`) {
					t.Fatalf("ParseOrigin(%q) = %q, %v; want an error naming the value and saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		origins []string
		enabled bool
		allows  map[string]bool
		err     string
	}{
		{name: "none", enabled: false, allows: map[string]bool{"https://a.example": false, "": false}},
		{name: "list", origins: []string{"https://a.example", "http://127.0.0.1:3000"}, enabled: true,
			allows: map[string]bool{"https://a.example": true, "http://127.0.0.1:3000": true, "https://b.example": false,
				"http://a.example": false, "https://a.example:8443": false, "null": false, "": false}},
		{name: "normalised", origins: []string{"https://A.example:443"}, enabled: true, allows: map[string]bool{"https://a.example": true}},
		{name: "any", origins: []string{"*"}, enabled: true, allows: map[string]bool{"https://b.example": true, "http://127.0.0.1:1": true, "": false}},
		{name: "bad among good", origins: []string{"https://a.example", "https://b.example/"}, err: `"https://b.example/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.origins)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() != tc.enabled {
				t.Errorf("Enabled() = %v", p.Enabled())
			}
			for o, want := range tc.allows {
				if p.Allows(o) != want {
					t.Errorf("Allows(%q) = %v, want %v", o, !want, want)
				}
			}
		})
	}
	var nilPolicy *Policy
	if nilPolicy.Enabled() || nilPolicy.Allows("https://a.example") {
		t.Error("a nil policy allows something")
	}
}

func TestHandler(t *testing.T) {
	const allowed, other = "https://app.example.com", "https://evil.example"
	// The handler behind answers like the services do: 405 to OPTIONS,
	// and an ID and a Vary of its own otherwise.
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "r1")
		w.Header().Add("Vary", "Authorization")
		if r.Method == http.MethodOptions {
			httpserve.Error(w, http.StatusMethodNotAllowed, "", "Method not allowed.")
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{}"))
	})
	preflight := map[string]string{"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization,content-type"}
	type want struct {
		status       int
		reached      bool // the answer is next's
		allowOrigin  string
		expose       bool
		preflightHdr bool
		vary         []string
		errorMessage string
	}
	corsVary := []string{"Origin", "Authorization"}
	preflightVary := []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}
	for _, tc := range []struct {
		name    string
		origins []string
		method  string
		origin  string
		headers map[string]string
		want    want
	}{
		{"disabled: GET untouched", nil, http.MethodGet, allowed, nil,
			want{status: 200, reached: true, vary: []string{"Authorization"}}},
		{"disabled: preflight falls through", nil, http.MethodOptions, allowed, preflight,
			want{status: 405, reached: true, vary: []string{"Authorization"}}},
		{"allowed GET", []string{allowed}, http.MethodGet, allowed, nil,
			want{status: 200, reached: true, allowOrigin: allowed, expose: true, vary: corsVary}},
		{"allowed PUT", []string{allowed}, http.MethodPut, allowed, nil,
			want{status: 200, reached: true, allowOrigin: allowed, expose: true, vary: corsVary}},
		{"not allowed GET: no permission", []string{allowed}, http.MethodGet, other, nil,
			want{status: 200, reached: true, vary: corsVary}},
		{"no Origin: same-origin or not a browser", []string{allowed}, http.MethodGet, "", nil,
			want{status: 200, reached: true, vary: corsVary}},
		{"any origin", []string{"*"}, http.MethodGet, other, nil,
			want{status: 200, reached: true, allowOrigin: other, expose: true, vary: corsVary}},
		{"allowed preflight", []string{allowed}, http.MethodOptions, allowed, preflight,
			want{status: 204, allowOrigin: allowed, preflightHdr: true, vary: preflightVary}},
		{"preflight of any origin", []string{"*"}, http.MethodOptions, other, preflight,
			want{status: 204, allowOrigin: other, preflightHdr: true, vary: preflightVary}},
		{"not allowed preflight: 403", []string{allowed}, http.MethodOptions, other, preflight,
			want{status: 403, vary: preflightVary, errorMessage: "Cross-origin requests from " + other + " are not allowed."}},
		{"OPTIONS without a requested method is not a preflight", []string{allowed}, http.MethodOptions, allowed, nil,
			want{status: 405, reached: true, allowOrigin: allowed, expose: true, vary: corsVary}},
		{"OPTIONS without Origin is not a preflight", []string{allowed}, http.MethodOptions, "", preflight,
			want{status: 405, reached: true, vary: corsVary}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.origins)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(tc.method, "/cms/app/events", nil)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			p.Handler(next).ServeHTTP(rec, req)
			h := rec.Header()
			if rec.Code != tc.want.status {
				t.Errorf("status %d, want %d", rec.Code, tc.want.status)
			}
			if reached := h.Get("X-Request-Id") == "r1"; reached != tc.want.reached {
				t.Errorf("reached the handler: %v, want %v", reached, tc.want.reached)
			}
			if got := h.Values("Access-Control-Allow-Origin"); tc.want.allowOrigin == "" && len(got) > 0 ||
				tc.want.allowOrigin != "" && !reflect.DeepEqual(got, []string{tc.want.allowOrigin}) {
				t.Errorf("Access-Control-Allow-Origin %q, want %q once", got, tc.want.allowOrigin)
			}
			if got := h.Get("Access-Control-Expose-Headers"); (got == ExposeHeaders) != tc.want.expose {
				t.Errorf("Access-Control-Expose-Headers %q, want it: %v", got, tc.want.expose)
			}
			if tc.want.expose {
				for _, name := range []string{"X-Request-Id", "ETag", "Retry-After"} {
					if !strings.Contains(h.Get("Access-Control-Expose-Headers"), name) {
						t.Errorf("%s not exposed", name)
					}
				}
			}
			pre := map[string]string{
				"Access-Control-Allow-Methods": AllowMethods, "Access-Control-Allow-Headers": AllowHeaders, "Access-Control-Max-Age": "7200",
			}
			for k, v := range pre {
				if got := h.Get(k); tc.want.preflightHdr && got != v || !tc.want.preflightHdr && got != "" {
					t.Errorf("%s %q, want it (%q): %v", k, got, v, tc.want.preflightHdr)
				}
			}
			if tc.want.preflightHdr {
				for _, m := range []string{"GET", "PUT", "POST", "OPTIONS"} {
					if !strings.Contains(AllowMethods, m) {
						t.Errorf("%s not among the allowed methods", m)
					}
				}
				for _, name := range []string{"Authorization", "Authorize", "Content-Type", "Idempotency-Key"} {
					if !strings.Contains(AllowHeaders, name) {
						t.Errorf("%s not among the allowed headers", name)
					}
				}
				if rec.Body.Len() != 0 {
					t.Errorf("a 204 with a body: %q", rec.Body)
				}
			}
			if h.Get("Access-Control-Allow-Credentials") != "" {
				t.Error("credentials allowed; tokens travel in headers")
			}
			if got := h.Values("Vary"); !reflect.DeepEqual(got, tc.want.vary) {
				t.Errorf("Vary %q, want %q", got, tc.want.vary)
			}
			if tc.want.errorMessage != "" {
				var body httpserve.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.HTTPStatus != 403 ||
					body.ErrorType != "HandledError" || body.Message != tc.want.errorMessage || h.Get("Content-Type") != "application/json" {
					t.Errorf("body %s (%v), want the JSON error shape saying %q", rec.Body, err, tc.want.errorMessage)
				}
			}
		})
	}
}

func TestHandlerDisabledIsNext(t *testing.T) {
	next := http.NotFoundHandler()
	for _, p := range []*Policy{nil, {}} {
		if got := p.Handler(next); reflect.ValueOf(got).Pointer() != reflect.ValueOf(next).Pointer() {
			t.Errorf("a policy allowing nothing wraps the handler")
		}
	}
}
