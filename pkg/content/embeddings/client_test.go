package embeddings

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/embedstandin"
)

const testDim = 32

// newTestClient starts a stand-in and a client of it with a short retry
// backoff.
func newTestClient(t *testing.T, cfg Config) (*Client, *embedstandin.Server) {
	t.Helper()
	s := embedstandin.New(testDim)
	if cfg.URL == "" {
		cfg.URL = s.Start(t)
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.backoff = 5 * time.Millisecond
	return c, s
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text number %d about topic %d", i, i%7)
	}
	return out
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; empty for success
	}{
		{"ok", Config{URL: "http://127.0.0.1:11434/v1", Model: "m"}, ""},
		{"ok https trailing slash", Config{URL: "https://api.example.com/v1/", Model: "m"}, ""},
		{"bad scheme", Config{URL: "ftp://host/v1", Model: "m"}, "scheme"},
		{"no scheme, IP", Config{URL: "127.0.0.1:11434", Model: "m"}, "parse URL"},
		{"no scheme, name", Config{URL: "localhost:11434", Model: "m"}, "scheme"},
		{"empty", Config{Model: "m"}, "scheme"},
		{"no host", Config{URL: "http:///v1", Model: "m"}, "missing host"},
		{"query", Config{URL: "http://h/v1?x=1", Model: "m"}, "query"},
		{"unparsable", Config{URL: "http://h/%zz", Model: "m"}, "parse URL"},
		{"no model", Config{URL: "http://h/v1"}, "missing model"},
		{"negative batch", Config{URL: "http://h/v1", Model: "m", BatchSize: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg, nil)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.Model() != tt.cfg.Model || c.batchSize != defaultBatchSize || c.timeout != defaultTimeout {
					t.Errorf("defaults: model %q batch %d timeout %v", c.Model(), c.batchSize, c.timeout)
				}
				if !strings.HasSuffix(c.endpoint, "/v1/embeddings") || strings.Contains(c.endpoint, "//embeddings") {
					t.Errorf("endpoint %q", c.endpoint)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestEmbedMatchesServerInOrder(t *testing.T) {
	tests := []struct {
		name   string
		tamper func([]embedstandin.Item) []embedstandin.Item
	}{
		{"in order", nil},
		{"reversed", func(items []embedstandin.Item) []embedstandin.Item {
			slices.Reverse(items)
			return items
		}},
		{"rotated", func(items []embedstandin.Item) []embedstandin.Item {
			return append(items[1:], items[0])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := newTestClient(t, Config{BatchSize: 4})
			s.Tamper(tt.tamper)
			in := texts(10)
			got, err := c.Embed(context.Background(), in)
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != len(in) {
				t.Fatalf("got %d vectors for %d texts", len(got), len(in))
			}
			for i, text := range in {
				if !slices.Equal(got[i], s.Vector(text)) {
					t.Errorf("vector %d differs from the server's for %q", i, text)
				}
			}
		})
	}
}

func TestEmbedEmpty(t *testing.T) {
	c, s := newTestClient(t, Config{})
	got, err := c.Embed(context.Background(), nil)
	if got != nil || err != nil || s.Requests() != 0 {
		t.Fatalf("Embed(nil) = %v, %v after %d requests; want nil, nil, 0", got, err, s.Requests())
	}
}

func TestEmbedBatching(t *testing.T) {
	tests := []struct {
		texts, batch, wantRequests int
	}{
		{1, 0, 1},
		{64, 0, 1},
		{65, 0, 2},
		{10, 3, 4},
		{10, 10, 1},
		{10, 1, 10},
		{200, 64, 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d texts by %d", tt.texts, tt.batch), func(t *testing.T) {
			c, s := newTestClient(t, Config{BatchSize: tt.batch})
			got, err := c.Embed(context.Background(), texts(tt.texts))
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != tt.texts {
				t.Errorf("got %d vectors, want %d", len(got), tt.texts)
			}
			if s.Requests() != tt.wantRequests || s.Inputs() != tt.texts {
				t.Errorf("server saw %d requests, %d inputs; want %d, %d", s.Requests(), s.Inputs(), tt.wantRequests, tt.texts)
			}
		})
	}
}

func TestEmbedBatchConcurrencyBounded(t *testing.T) {
	s := embedstandin.New(testDim)
	s.Delay(20 * time.Millisecond)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	h := s.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		h.ServeHTTP(w, r)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, Config{URL: srv.URL + "/v1", BatchSize: 2})
	if _, err := c.Embed(context.Background(), texts(16)); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if peak != batchConcurrency {
		t.Errorf("peak concurrent requests %d, want %d", peak, batchConcurrency)
	}
}

func TestEmbedAPIKey(t *testing.T) {
	tests := []struct {
		name, serverKey, clientKey string
		wantStatus                 int // 0 for success
	}{
		{"no key needed", "", "", 0},
		{"key sent when not needed", "", "sk-x", 0},
		{"right key", "sk-right", "sk-right", 0},
		{"wrong key", "sk-right", "sk-wrong", http.StatusUnauthorized},
		{"missing key", "sk-right", "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := newTestClient(t, Config{APIKey: tt.clientKey})
			s.RequireKey(tt.serverKey)
			_, err := c.Embed(context.Background(), []string{"hello"})
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("Embed: %v", err)
				}
				return
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tt.wantStatus {
				t.Fatalf("Embed error = %v, want status %d", err, tt.wantStatus)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Errorf("error reveals the key: %v", err)
			}
			if s.Requests() != 1 {
				t.Errorf("%d requests; a 401 must not be retried", s.Requests())
			}
		})
	}
}

func TestEmbedErrors(t *testing.T) {
	setNaN := func(items []embedstandin.Item) []embedstandin.Item {
		items[1].Embedding[3] = float32(math.NaN())
		return items
	}
	tests := []struct {
		name         string
		setup        func(s *embedstandin.Server)
		cfg          Config
		ctxTimeout   time.Duration
		texts        int
		wantIs       error
		wantStatus   int
		wantMsg      []string // substrings of the error text
		wantRequests int
	}{
		{
			name:         "500 retried once with message",
			setup:        func(s *embedstandin.Server) { s.Fail(500) },
			wantStatus:   500,
			wantMsg:      []string{"status 500", "stand-in failure 500", "also on retry", "/v1/embeddings"},
			wantRequests: 2,
		},
		{
			name:         "429 retried once",
			setup:        func(s *embedstandin.Server) { s.Fail(429) },
			wantStatus:   429,
			wantRequests: 2,
		},
		{
			name:         "400 not retried",
			setup:        func(s *embedstandin.Server) { s.Fail(400) },
			wantStatus:   400,
			wantMsg:      []string{"status 400 Bad Request: stand-in failure 400"},
			wantRequests: 1,
		},
		{
			name:         "401",
			setup:        func(s *embedstandin.Server) { s.RequireKey("secret") },
			wantStatus:   401,
			wantMsg:      []string{"Incorrect API key"},
			wantRequests: 1,
		},
		{
			name: "too few embeddings",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item { return items[:len(items)-1] })
			},
			wantMsg:      []string{"2 embeddings for 3 inputs"},
			wantRequests: 1,
		},
		{
			name: "too many embeddings",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item { return append(items, items[0]) })
			},
			wantMsg:      []string{"4 embeddings for 3 inputs"},
			wantRequests: 1,
		},
		{
			name: "duplicate index",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item { items[2].Index = 0; return items })
			},
			wantMsg: []string{"index 0 appears twice"},
		},
		{
			name: "index out of range",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item { items[2].Index = 7; return items })
			},
			wantMsg: []string{"index 7 outside 0-2"},
		},
		{
			name: "dimension mismatch within a batch",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item {
					items[2].Embedding = items[2].Embedding[:5]
					return items
				})
			},
			wantMsg: []string{"index 2 has 5 dimensions, others have 32"},
		},
		{
			name: "dimension mismatch across batches",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item {
					if len(items) == 1 { // the last, short batch
						items[0].Embedding = items[0].Embedding[:5]
					}
					return items
				})
			},
			cfg:     Config{BatchSize: 2},
			wantMsg: []string{"text 2 has 5 dimensions, text 0 has 32"},
		},
		{
			name: "empty embedding",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item { items[1].Embedding = nil; return items })
			},
			wantMsg: []string{"index 1 is empty"},
		},
		{
			name:    "NaN",
			setup:   func(s *embedstandin.Server) { s.Tamper(setNaN) },
			wantIs:  errNonFinite,
			wantMsg: []string{"non-finite value NaN"},
		},
		{
			name: "negative infinity",
			setup: func(s *embedstandin.Server) {
				s.Tamper(func(items []embedstandin.Item) []embedstandin.Item {
					items[0].Embedding[0] = float32(math.Inf(-1))
					return items
				})
			},
			wantIs:  errNonFinite,
			wantMsg: []string{"non-finite value -Infinity"},
		},
		{
			name:         "deadline from ctx, not retried",
			setup:        func(s *embedstandin.Server) { s.Delay(5 * time.Second) },
			ctxTimeout:   50 * time.Millisecond,
			wantIs:       context.DeadlineExceeded,
			wantRequests: 1,
		},
		{
			name:         "deadline from Config.Timeout, not retried",
			setup:        func(s *embedstandin.Server) { s.Delay(5 * time.Second) },
			cfg:          Config{Timeout: 50 * time.Millisecond},
			wantIs:       context.DeadlineExceeded,
			wantRequests: 1,
		},
		{
			name:       "deadline while batches are in flight",
			setup:      func(s *embedstandin.Server) { s.Delay(5 * time.Second) },
			cfg:        Config{BatchSize: 1},
			ctxTimeout: 50 * time.Millisecond,
			wantIs:     context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := newTestClient(t, tt.cfg)
			tt.setup(s)
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			start := time.Now()
			got, err := c.Embed(ctx, texts(3))
			if err == nil {
				t.Fatalf("Embed succeeded with %d vectors", len(got))
			}
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("Embed took %v", elapsed)
			}
			t.Logf("error: %v", err)
			if got != nil {
				t.Errorf("Embed returned vectors with an error")
			}
			if !strings.HasPrefix(err.Error(), "embeddings: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v is not %v", err, tt.wantIs)
			}
			if tt.wantStatus != 0 {
				se, ok := errors.AsType[*StatusError](err)
				if !ok || se.StatusCode != tt.wantStatus {
					t.Errorf("error %v: want status %d", err, tt.wantStatus)
				}
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if tt.wantRequests != 0 && s.Requests() != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", s.Requests(), tt.wantRequests)
			}
		})
	}
}

func TestEmbedRetryThenSuccess(t *testing.T) {
	for _, status := range []int{429, 500, 502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			c, s := newTestClient(t, Config{})
			s.FailNext(1, status)
			got, err := c.Embed(context.Background(), []string{"a", "b"})
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != 2 || s.Requests() != 2 || s.Inputs() != 2 {
				t.Errorf("%d vectors after %d requests, %d inputs; want 2, 2, 2", len(got), s.Requests(), s.Inputs())
			}
		})
	}
}

func TestEmbedRetryHonoursContext(t *testing.T) {
	c, s := newTestClient(t, Config{})
	c.backoff = time.Hour
	s.Fail(503)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Embed(ctx, []string{"a"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline", err)
	}
	if se, ok := errors.AsType[*StatusError](err); !ok || se.StatusCode != 503 {
		t.Errorf("error %v should keep the 503 that caused the retry", err)
	}
	if s.Requests() != 1 {
		t.Errorf("%d requests, want 1", s.Requests())
	}
}

func TestEmbedConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := newTestClient(t, Config{URL: url + "/v1"})
	_, err := c.Embed(context.Background(), []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "on retry") {
		t.Fatalf("error %v, want a transport failure after a retry", err)
	}
}

// TestEmbedRawErrorBody covers servers whose errors are not OpenAI JSON,
// such as a proxy's HTML page.
func TestEmbedRawErrorBody(t *testing.T) {
	tests := []struct {
		name, body string
		wantMsg    string
		wantBody   int
	}{
		{"html", "<html>" + strings.Repeat("x", 5000) + "</html>", "", errorBodyPrefix},
		{"error string", `{"error":"model \"nomic\" not found, try pulling it first"}`, `model "nomic" not found, try pulling it first`, 59},
		{"empty", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			c, _ := newTestClient(t, Config{URL: srv.URL})
			_, err := c.Embed(context.Background(), []string{"a"})
			se, ok := errors.AsType[*StatusError](err)
			if !ok || se.StatusCode != 404 {
				t.Fatalf("error %v, want a 404 StatusError", err)
			}
			if se.Message != tt.wantMsg || len(se.Body) != tt.wantBody {
				t.Errorf("message %q, body of %d bytes; want %q, %d", se.Message, len(se.Body), tt.wantMsg, tt.wantBody)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error text of %d bytes is unbounded", len(err.Error()))
			}
		})
	}
}

func TestDecodeOutOfRange(t *testing.T) {
	out := make([][]float32, 1)
	err := decodeResponse([]byte(`{"data":[{"index":0,"embedding":[0.5, 1e39]}]}`), out)
	if !errors.Is(err, errNonFinite) {
		t.Fatalf("error %v, want non-finite", err)
	}
	err = decodeResponse([]byte(`{"data":[{"index":0,"embedding":[0.5, "x"]}]}`), out)
	if err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("error %v, want not a number", err)
	}
	err = decodeResponse([]byte(`{"data":[{"index":0,"embedding":[0.5, -2.5e-3 ]}]}`), out)
	if err != nil || !slices.Equal(out[0], []float32{0.5, -2.5e-3}) {
		t.Fatalf("decode = %v, %v", out[0], err)
	}
}
