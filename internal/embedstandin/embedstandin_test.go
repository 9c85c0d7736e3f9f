package embedstandin

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func post(t *testing.T, h http.Handler, path, body string, header http.Header) (int, response) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("response %q is not JSON: %v", rec.Body.String(), err)
	}
	return rec.Code, resp
}

func TestRequests(t *testing.T) {
	tests := []struct {
		name, path, body string
		key              string // required key
		auth             string // Authorization header sent
		wantStatus       int
		wantVectors      int
		wantMsg          string
	}{
		{"array", "/v1/embeddings", `{"model":"m","input":["a b","c"]}`, "", "", 200, 2, ""},
		{"string", "/embeddings", `{"model":"m","input":"just one"}`, "", "", 200, 1, ""},
		{"float format", "/v1/embeddings", `{"model":"m","input":["a"],"encoding_format":"float"}`, "", "", 200, 1, ""},
		{"base64 format", "/v1/embeddings", `{"model":"m","input":["a"],"encoding_format":"base64"}`, "", "", 400, 0, "encoding_format"},
		{"missing model", "/v1/embeddings", `{"input":["a"]}`, "", "", 400, 0, "model"},
		{"missing input", "/v1/embeddings", `{"model":"m"}`, "", "", 400, 0, "input"},
		{"null input", "/v1/embeddings", `{"model":"m","input":null}`, "", "", 400, 0, "input"},
		{"empty input", "/v1/embeddings", `{"model":"m","input":[]}`, "", "", 400, 0, "empty"},
		{"numbers input", "/v1/embeddings", `{"model":"m","input":[1,2]}`, "", "", 400, 0, "array of strings"},
		{"bad JSON", "/v1/embeddings", `{"model":`, "", "", 400, 0, "invalid JSON"},
		{"key required, missing", "/v1/embeddings", `{"model":"m","input":"a"}`, "k1", "", 401, 0, "API key"},
		{"key required, wrong", "/v1/embeddings", `{"model":"m","input":"a"}`, "k1", "Bearer k2", 401, 0, "API key"},
		{"key required, right", "/v1/embeddings", `{"model":"m","input":"a"}`, "k1", "Bearer k1", 200, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(8)
			s.RequireKey(tt.key)
			h := http.Header{"Content-Type": {"application/json"}}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			status, resp := post(t, s.Handler(), tt.path, tt.body, h)
			if status != tt.wantStatus || len(resp.Data) != tt.wantVectors {
				t.Fatalf("status %d with %d vectors, want %d with %d", status, len(resp.Data), tt.wantStatus, tt.wantVectors)
			}
			if tt.wantMsg != "" && (resp.Error == nil || !strings.Contains(resp.Error.Message, tt.wantMsg)) {
				t.Errorf("error %+v does not mention %q", resp.Error, tt.wantMsg)
			}
			for i, d := range resp.Data {
				if d.Index != i || len(d.Embedding) != 8 {
					t.Errorf("item %d: index %d, %d dims", i, d.Index, len(d.Embedding))
				}
			}
			if resp.Model != "" && resp.Model != "m" {
				t.Errorf("model %q", resp.Model)
			}
			if s.Requests() != 1 || s.Inputs() != tt.wantVectors {
				t.Errorf("counted %d requests, %d inputs", s.Requests(), s.Inputs())
			}
		})
	}
}

func TestFail(t *testing.T) {
	s := New(8)
	h := s.Handler()
	body := `{"model":"m","input":"a"}`
	s.Fail(503)
	for range 2 {
		if status, resp := post(t, h, "/v1/embeddings", body, nil); status != 503 || resp.Error == nil {
			t.Fatalf("status %d, error %+v; want 503 with an error", status, resp.Error)
		}
	}
	s.Fail(0)
	s.FailNext(1, 429)
	for _, want := range []int{429, 200, 200} {
		if status, _ := post(t, h, "/v1/embeddings", body, nil); status != want {
			t.Fatalf("status %d, want %d", status, want)
		}
	}
	if s.Requests() != 5 || s.Inputs() != 2 {
		t.Errorf("counted %d requests, %d inputs; want 5, 2", s.Requests(), s.Inputs())
	}
}

func TestMethod(t *testing.T) {
	s := New(4)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/embeddings", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d", rec.Code)
	}
}

func TestVector(t *testing.T) {
	s := New(256)
	cos := func(a, b []float32) float64 {
		var d float64
		for i := range a {
			d += float64(a[i]) * float64(b[i])
		}
		return d
	}
	for _, text := range []string{"Reset your password", "Billing and invoices", "x"} {
		v := s.Vector(text)
		if n := cos(v, v); math.Abs(n-1) > 1e-5 {
			t.Errorf("%q: norm² %v, want 1", text, n)
		}
		if w := s.Vector(text); cos(v, w) < 1-1e-6 {
			t.Errorf("%q: not deterministic", text)
		}
	}
	if got := s.Vector("HOW do I reset my Password?"); cos(got, s.Vector("how do i reset my password")) < 1-1e-6 {
		t.Errorf("case and punctuation change the vector")
	}
	q := s.Vector("how do I reset my password")
	near, far := cos(q, s.Vector("password reset instructions")), cos(q, s.Vector("monthly billing invoices"))
	if near <= far+0.2 {
		t.Errorf("shared words not closer: near %.3f, far %.3f", near, far)
	}
	for _, x := range s.Vector(" ... ") {
		if x != 0 {
			t.Fatalf("text without words gave a non-zero vector")
		}
	}
}

func TestTamperWritesNonFinite(t *testing.T) {
	s := New(3)
	s.Tamper(func(items []Item) []Item {
		items[0].Embedding = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
		return items
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(`{"model":"m","input":"a"}`)))
	if !strings.Contains(rec.Body.String(), `"embedding":[NaN,Infinity,-Infinity]`) {
		t.Errorf("body %s", rec.Body.String())
	}
}

func TestStartAndDelay(t *testing.T) {
	s := New(4)
	url := s.Start(t)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("base URL %q", url)
	}
	s.Delay(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/embeddings", strings.NewReader(`{"model":"m","input":"a"}`))
	start := time.Now()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request beat the delay")
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("delay ignored the client's deadline")
	}
	// Cleanup closes the server; a handler stuck in the delay would hold
	// the test for ten seconds.
}
