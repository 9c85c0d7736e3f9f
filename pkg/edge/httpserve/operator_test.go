package httpserve

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestIsOperatorPath(t *testing.T) {
	for _, tc := range []struct {
		path     string
		operator bool
		health   bool
	}{
		{"/metrics", true, false},
		{"/metrics/", true, false},
		{"/debug/pprof/", true, false},
		{"/debug/pprof/heap", true, false},
		{"/debug/pprof", true, false},
		{"/status", true, false},
		{"/status/data", true, false},
		{"/analytics", true, false},
		{"/analytics/data", true, false},
		{"/healthz", false, true},
		{"/readyz", false, true},
		{"/", false, false},
		{"/cms/app", false, false},
		{"/cms/app/events", false, false},
		{"/cms/status", false, false},
		{"/metricsx", false, false},
		{"/statuses", false, false},
		{"/analyticsdata", false, false},
		{"/debug", false, false},
		{"/openapi.yaml", false, false},
		{"/healthz/", false, false},
	} {
		if got := IsOperatorPath(tc.path); got != tc.operator {
			t.Errorf("IsOperatorPath(%q) = %v, want %v", tc.path, got, tc.operator)
		}
		if got := IsHealthPath(tc.path); got != tc.health {
			t.Errorf("IsHealthPath(%q) = %v, want %v", tc.path, got, tc.health)
		}
	}
}

// echo answers 200 naming the path, standing for a service's handler.
func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
	})
}

func TestFilters(t *testing.T) {
	for _, tc := range []struct {
		path       string
		main, oper int
		// pprof: the operator listener answers it with Go's profiles,
		// not the service's handler.
		pprof bool
	}{
		{"/metrics", 404, 200, false},
		{"/status", 404, 200, false},
		{"/status/data", 404, 200, false},
		{"/analytics", 404, 200, false},
		{"/analytics/data", 404, 200, false},
		{"/debug/pprof/", 404, 200, true},
		{"/healthz", 200, 200, false},
		{"/readyz", 200, 200, false},
		{"/cms/app", 200, 404, false},
		{"/cms/app/events", 200, 404, false},
		{"/openapi.yaml", 200, 404, false},
		{"/", 200, 404, false},
	} {
		for _, l := range []struct {
			name string
			h    http.Handler
			want int
		}{{"main", MainOnly(echo()), tc.main}, {"operator", OperatorOnly(echo()), tc.oper}} {
			rec := httptest.NewRecorder()
			l.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != l.want {
				t.Errorf("%s %s: %d, want %d: %s", l.name, tc.path, rec.Code, l.want, rec.Body)
				continue
			}
			switch {
			case l.want == http.StatusNotFound:
				var e ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.HTTPStatus != 404 || e.ErrorType != "HandledError" || !strings.Contains(e.Message, "operator address") {
					t.Errorf("%s %s: body %s, want the error shape naming the operator address", l.name, tc.path, rec.Body)
				}
			case tc.pprof:
				if !strings.Contains(rec.Body.String(), "goroutine") {
					t.Errorf("%s %s: %.200s, want the profiles' index", l.name, tc.path, rec.Body)
				}
			case !strings.Contains(rec.Body.String(), `"path":"`+tc.path+`"`):
				t.Errorf("%s %s: %s, want the service's answer", l.name, tc.path, rec.Body)
			}
		}
	}
}

// TestServeOperator starts a service with an operator listener: /metrics
// answers there only, health on both, the service's own paths on the main
// one only, and ending ctx drains both.
func TestServeOperator(t *testing.T) {
	mux := http.NewServeMux()
	checker := NewChecker()
	Mount(GetOn(mux), NewRegistry(), checker)
	mux.Handle("GET /cms/app", echo())
	srv := NewServer(mux, DefaultLimits(), discard())
	ln, err := Listen(discard(), "127.0.0.1:0", "", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	main, oper := "http://"+ln.Addr().String(), "http://"+OperatorOf(ln).Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, discard(), "test", srv, ln, checker, 5*time.Second) }()

	for _, tc := range []struct {
		base, path string
		want       int
	}{
		{main, "/metrics", 404}, {oper, "/metrics", 200},
		{main, "/debug/pprof/", 404}, {oper, "/debug/pprof/", 200},
		{main, "/healthz", 200}, {oper, "/healthz", 200},
		{main, "/readyz", 200}, {oper, "/readyz", 200},
		{main, "/cms/app", 200}, {oper, "/cms/app", 404},
	} {
		resp, err := http.Get(tc.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s%s: %d, want %d: %.200s", tc.base, tc.path, resp.StatusCode, tc.want, b)
		}
		if tc.base == oper && tc.path == "/metrics" && !strings.Contains(string(b), "cms_build_info") {
			t.Errorf("operator /metrics lacks cms_build_info:\n%.300s", b)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	for _, base := range []string{main, oper} {
		if c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://")); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the drain", base)
		}
	}
}

// TestServeOperatorFails checks that a failing operator listener ends
// Serve and closes the main one too.
func TestServeOperatorFails(t *testing.T) {
	ln, err := Listen(discard(), "127.0.0.1:0", "", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	OperatorOf(ln).Close()
	main := ln.Addr().String()
	err = Serve(t.Context(), discard(), "test", NewServer(http.NotFoundHandler(), DefaultLimits(), discard()), ln, NewChecker(), time.Second)
	if err == nil || !strings.Contains(err.Error(), "serve HTTP") {
		t.Errorf("Serve with a closed operator listener = %v", err)
	}
	if c, err := net.Dial("tcp", main); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", main)
	}
}
