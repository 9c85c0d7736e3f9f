// Package embedstandin is a local stand-in for an OpenAI-compatible
// embeddings endpoint, for tests. It answers POST /v1/embeddings and
// /embeddings with deterministic vectors: a hashed bag of lower-cased words
// and character trigrams projected into a fixed number of dimensions and
// unit-normalised, so texts sharing words come out similar.
//
// Controls make it misbehave the way real endpoints do (failing statuses,
// slowness, missing keys, malformed answers) and count what it was asked.
package embedstandin

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// maxRequestBody bounds what the stand-in reads of a request.
const maxRequestBody = 32 << 20

// Item is one embedding of a response, as Tamper sees it. Index is the
// position of the input it answers.
type Item struct {
	Index     int
	Embedding []float32
}

// Server is the stand-in. Its methods are safe for concurrent use, including
// while requests are served.
type Server struct {
	dim int

	mu         sync.Mutex
	failStatus int
	failNext   int
	failNextSt int
	delay      time.Duration
	key        string
	tamper     func([]Item) []Item
	requests   int
	inputs     int
}

// New returns a stand-in producing vectors of dim dimensions (at least 1).
func New(dim int) *Server {
	return &Server{dim: max(dim, 1)}
}

// Start serves the stand-in on 127.0.0.1 until the test ends and returns its
// base URL, ending in /v1 like an OpenAI-compatible server's.
func (s *Server) Start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// Fail makes every following request fail with status and an OpenAI-style
// error body; Fail(0) restores normal answers.
func (s *Server) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failStatus = status
}

// FailNext makes the next n requests fail with status, then answers normally.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failNextSt = n, status
}

// Delay makes every following request wait d before answering (or until the
// client gives up).
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// RequireKey makes requests without "Authorization: Bearer key" fail with
// 401. An empty key accepts any request.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Tamper rewrites every following response's items before they are written,
// to imitate broken servers (reordered, missing or extra items, differing
// dimensions, non-finite values, which are written as Python's json module
// writes them: NaN, Infinity, -Infinity). nil restores normal answers.
func (s *Server) Tamper(f func([]Item) []Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tamper = f
}

// Requests counts requests received on the embeddings paths, failed or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Inputs counts texts embedded in successful answers.
func (s *Server) Inputs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inputs
}

// Handler serves POST /v1/embeddings and /embeddings.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/embeddings", s.serve)
	mux.HandleFunc("/embeddings", s.serve)
	return mux
}

// Vector is the embedding the stand-in answers for text. A text with no
// letters or digits has the zero vector.
func (s *Server) Vector(text string) []float32 {
	acc := make([]float64, s.dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		if x>>63 == 1 {
			w = -w
		}
		acc[(x&(1<<63-1))%uint64(s.dim)] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		add("w\x00"+w, 1)
		rs := []rune(" " + w + " ")
		for i := 0; i+3 <= len(rs); i++ {
			add("t\x00"+string(rs[i:i+3]), 0.5)
		}
	}
	var norm float64
	for _, x := range acc {
		norm += x * x
	}
	v := make([]float32, s.dim)
	if norm == 0 {
		return v
	}
	norm = math.Sqrt(norm)
	for i, x := range acc {
		v[i] = float32(x / norm)
	}
	return v
}

type request struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	delay, key, tamper := s.delay, s.key, s.tamper
	status := s.failStatus
	if s.failNext > 0 {
		s.failNext--
		status = s.failNextSt
	}
	s.mu.Unlock()

	// Read the body first: only then does net/http watch the connection
	// and cancel r.Context() when the client gives up during the delay.
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if delay > 0 {
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		}
	}
	if status != 0 {
		writeError(w, status, "server_error", fmt.Sprintf("stand-in failure %d", status))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method "+r.Method+" not allowed")
		return
	}
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if readErr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+readErr.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter")
		return
	}
	inputs, err := parseInput(req.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "unsupported encoding_format "+strconv.Quote(req.EncodingFormat))
		return
	}

	items := make([]Item, len(inputs))
	tokens := 0
	for i, text := range inputs {
		items[i] = Item{Index: i, Embedding: s.Vector(text)}
		tokens += len(strings.Fields(text))
	}
	if tamper != nil {
		items = tamper(items)
	}
	s.mu.Lock()
	s.inputs += len(inputs)
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Write(encodeResponse(req.Model, items, tokens))
}

// parseInput accepts a string or a non-empty array of strings.
func parseInput(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("you must provide an input parameter")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("input must be a string or an array of strings")
	}
	if len(many) == 0 {
		return nil, fmt.Errorf("input must not be empty")
	}
	return many, nil
}

// encodeResponse writes the answer by hand so that tampered non-finite
// values come out as literal NaN/Infinity, which encoding/json refuses.
func encodeResponse(model string, items []Item, tokens int) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(it.Index), 10)
		b = append(b, `,"embedding":[`...)
		for j, x := range it.Embedding {
			if j > 0 {
				b = append(b, ',')
			}
			f := float64(x)
			switch {
			case math.IsNaN(f):
				b = append(b, "NaN"...)
			case math.IsInf(f, 1):
				b = append(b, "Infinity"...)
			case math.IsInf(f, -1):
				b = append(b, "-Infinity"...)
			default:
				b = strconv.AppendFloat(b, f, 'g', -1, 32)
			}
		}
		b = append(b, "]}"...)
	}
	m, _ := json.Marshal(model)
	b = append(b, `],"model":`...)
	b = append(b, m...)
	b = fmt.Appendf(b, `,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, tokens, tokens)
	return b
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	body, _ := json.Marshal(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
