package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestReadiness(t *testing.T) {
	var brokerDown atomic.Bool
	var calls atomic.Int32
	c := NewChecker()
	c.cacheFor = 0 // every probe runs the checks
	c.Add("kafka", func(context.Context) error {
		calls.Add(1)
		if brokerDown.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	probeOn := func(operator bool) (int, map[string]any) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		if operator {
			req = req.WithContext(context.WithValue(req.Context(), operatorConn{}, true))
		}
		c.ReadyHandler().ServeHTTP(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return rec.Code, body
	}
	probe := func() (int, map[string]any) { return probeOn(false) }
	if code, _ := probe(); code != 200 {
		t.Errorf("healthy: %d", code)
	}
	brokerDown.Store(true)
	// The operator address says why; the listen address, which clients
	// reach, names the check only.
	code, body := probeOn(true)
	if code != 503 || body["failed"].(map[string]any)["kafka"] != "connection refused" {
		t.Errorf("broker down, on the operator address: %d %v", code, body)
	}
	code, body = probe()
	if code != 503 || body["failed"].(map[string]any)["kafka"] != Withheld {
		t.Errorf("broker down, on the listen address: %d %v", code, body)
	}
	brokerDown.Store(false)
	c.SetStopping()
	before := calls.Load()
	if code, body := probe(); code != 503 || body["failed"].(map[string]any)["server"] != "shutting down" {
		t.Errorf("stopping: %d %v", code, body)
	}
	if calls.Load() != before {
		t.Error("checks ran while stopping")
	}
}

func TestReadinessIsCached(t *testing.T) {
	var calls atomic.Int32
	c := NewChecker()
	c.Add("db", func(context.Context) error { calls.Add(1); return nil })
	for range 10 {
		c.Ready(context.Background())
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d checks for 10 probes within the cache time, want 1", n)
	}
}

func TestLive(t *testing.T) {
	rec := httptest.NewRecorder()
	LiveHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("%d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}
