// Package embeddings supplies what semantic search over an app's content
// needs: a client for OpenAI-compatible embeddings endpoints (Ollama, vLLM or
// a hosted service), a content-hash cache so that rebuilding an index at a
// new revision embeds only changed texts, an exhaustive cosine-similarity
// index, and ways to combine lexical and vector rankings: by scores
// weighed by how sure the lexical side is (Combine, what the knowledge
// base ranks by), or by reciprocal rank fusion (Fuse).
package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/backoff"
)

const (
	defaultTimeout   = 10 * time.Second
	defaultBatchSize = 64
	// batchConcurrency bounds the requests one Embed call has in flight, so
	// that an index build does not monopolise a local model server.
	batchConcurrency = 2
	// maxResponseBody bounds a response: 64 texts × 4096 dims of JSON
	// floats is about 6 MiB, so this leaves ample room while refusing
	// runaway answers.
	maxResponseBody = 64 << 20
	// errorBodyPrefix bounds how much of a failed response goes into an
	// error message.
	errorBodyPrefix = 512
	retryBackoff    = 250 * time.Millisecond
)

// Config of an OpenAI-compatible embeddings endpoint.
type Config struct {
	URL       string        // base URL, e.g. http://127.0.0.1:11434/v1 ; requests go to URL + "/embeddings"
	Model     string        // model name sent with every request
	APIKey    string        // sent as "Authorization: Bearer ..." when set
	Timeout   time.Duration // per request; zero means 10s
	BatchSize int           // texts per request; zero means 64
}

// Embedder turns texts into vectors, one per text, in order. Client
// satisfies it; Cache needs it.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Client calls an embeddings endpoint. It is safe for concurrent use.
type Client struct {
	endpoint  string
	model     string
	apiKey    string
	timeout   time.Duration
	batchSize int
	hc        *http.Client
	backoff   time.Duration
}

// StatusError reports an endpoint answering with a status other than 200.
type StatusError struct {
	StatusCode int
	// Message is the endpoint's own error message ({"error":{"message":..}}),
	// or empty when the body carried none.
	Message string
	// Body is the start of the response body, at most 512 bytes.
	Body string
}

func (e *StatusError) Error() string {
	s := "status " + strconv.Itoa(e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		s += " " + t
	}
	if e.Message != "" {
		return s + ": " + e.Message
	}
	if e.Body != "" {
		return s + ": " + strconv.Quote(e.Body)
	}
	return s
}

// retryable reports whether a second attempt may succeed: rate limiting and
// server-side failures usually pass.
func (e *StatusError) retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// New validates cfg and returns a client. hc nil means a client of its own
// with a bounded connection pool; per-request timeouts come from
// cfg.Timeout either way.
func New(cfg Config, hc *http.Client) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("embeddings: parse URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("embeddings: URL %q: scheme must be http or https", cfg.URL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("embeddings: URL %q: missing host", cfg.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("embeddings: URL %q: must not carry a query or fragment", cfg.URL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("embeddings: missing model")
	}
	if cfg.Timeout < 0 || cfg.BatchSize < 0 {
		return nil, fmt.Errorf("embeddings: negative timeout (%v) or batch size (%d)", cfg.Timeout, cfg.BatchSize)
	}
	c := &Client{
		endpoint:  strings.TrimRight(u.String(), "/") + "/embeddings",
		model:     cfg.Model,
		apiKey:    cfg.APIKey,
		timeout:   cfg.Timeout,
		batchSize: cfg.BatchSize,
		hc:        hc,
		backoff:   retryBackoff,
	}
	if c.timeout == 0 {
		c.timeout = defaultTimeout
	}
	if c.batchSize == 0 {
		c.batchSize = defaultBatchSize
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Questions are embedded concurrently, one request each.
		t.MaxIdleConnsPerHost = 32
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// Model is the model the client asks for.
func (c *Client) Model() string { return c.model }

// Embed returns one vector per text, in order, all of one dimension. Texts go
// in batches of Config.BatchSize, at most two requests at a time; the first
// failure cancels the rest. Empty texts are sent as they are (some hosted
// services refuse them). An empty texts list gives nil, nil.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	out := make([][]float32, len(texts))
	if len(texts) <= c.batchSize {
		if err := c.embedBatch(ctx, texts, out); err != nil {
			return nil, fmt.Errorf("embeddings: %w", err)
		}
		return out, nil
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		skipped  bool
		sem      = make(chan struct{}, batchConcurrency)
	)
	for start := 0; start < len(texts); start += c.batchSize {
		end := min(start+c.batchSize, len(texts))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			skipped = true
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.embedBatch(ctx, texts[start:end], out[start:end]); err != nil {
				mu.Lock()
				// The first error is the cause; later ones are mostly
				// the cancellation it triggered.
				if firstErr == nil {
					firstErr = fmt.Errorf("embeddings: texts %d-%d: %w", start, end-1, err)
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if skipped {
		return nil, fmt.Errorf("embeddings: %w", ctx.Err())
	}
	dim := len(out[0])
	for i, v := range out {
		if len(v) != dim {
			return nil, fmt.Errorf("embeddings: text %d has %d dimensions, text 0 has %d", i, len(v), dim)
		}
	}
	return out, nil
}

// embedBatch fills out with the vectors of texts, retrying once when the
// failure looks transient.
func (c *Client) embedBatch(ctx context.Context, texts []string, out [][]float32) error {
	body, err := json.Marshal(struct {
		Model          string   `json:"model"`
		Input          []string `json:"input"`
		EncodingFormat string   `json:"encoding_format"`
	}{c.model, texts, "float"})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	err = c.attempt(ctx, body, out)
	if err == nil || !retryable(ctx, err) {
		return err
	}
	if !backoff.Sleep(ctx, c.backoff) {
		return fmt.Errorf("%w (retry abandoned: %w)", err, ctx.Err())
	}
	if err2 := c.attempt(ctx, body, out); err2 != nil {
		if err2.Error() == err.Error() {
			return fmt.Errorf("%w (also on retry)", err2)
		}
		return fmt.Errorf("%w (on retry; first attempt: %w)", err2, err)
	}
	return nil
}

// retryable reports whether err is worth a second attempt: 429 and 5xx
// answers and connection failures. Timeouts are not retried: an endpoint
// that was too slow once is likely overloaded, and a retry would double the
// wait of a query that can fall back to lexical results.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.retryable()
	}
	return errors.Is(err, errTransport)
}

// errTransport marks failures to get an answer from the endpoint other than
// timeouts.
var errTransport = errors.New("transport failure")

func (c *Client) attempt(ctx context.Context, body []byte, out [][]float32) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// Name the deadline rather than the transport's wording of it.
			return fmt.Errorf("POST %s: %w", c.endpoint, ctx.Err())
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return fmt.Errorf("POST %s: %w", c.endpoint, err)
		}
		return fmt.Errorf("POST %s: %w: %w", c.endpoint, errTransport, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("read response: %w", ctx.Err())
		}
		return fmt.Errorf("read response: %w: %w", errTransport, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %w", c.endpoint, statusError(resp.StatusCode, data))
	}
	if len(data) > maxResponseBody {
		return fmt.Errorf("response from %s exceeds %d MiB", c.endpoint, maxResponseBody>>20)
	}
	if err := decodeResponse(data, out); err != nil {
		return fmt.Errorf("response from %s: %w", c.endpoint, err)
	}
	return nil
}

func statusError(code int, body []byte) *StatusError {
	e := &StatusError{StatusCode: code}
	var eb struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && len(eb.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		var str string
		switch {
		case json.Unmarshal(eb.Error, &obj) == nil:
			e.Message = obj.Message
		case json.Unmarshal(eb.Error, &str) == nil:
			// Some servers (older Ollama, vLLM) send {"error": "text"}.
			e.Message = str
		}
	}
	b := body[:min(len(body), errorBodyPrefix)]
	e.Body = strings.ToValidUTF8(string(b), "\uFFFD")
	return e
}

// decodeResponse fills out from a response body, checking count, indexes,
// dimensions and values.
func decodeResponse(data []byte, out [][]float32) error {
	var resp struct {
		Data []struct {
			Index     *int        `json:"index"`
			Embedding floatVector `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			if tok := nonFiniteAt(data, se.Offset); tok != "" {
				return fmt.Errorf("non-finite value %s in an embedding: %w", tok, errNonFinite)
			}
		}
		return fmt.Errorf("decode: %w", err)
	}
	if len(resp.Data) != len(out) {
		return fmt.Errorf("%d embeddings for %d inputs", len(resp.Data), len(out))
	}
	clear(out)
	dim := -1
	for i, d := range resp.Data {
		if d.Index == nil {
			return fmt.Errorf("embedding %d has no index", i)
		}
		idx := *d.Index
		if idx < 0 || idx >= len(out) {
			return fmt.Errorf("embedding %d has index %d outside 0-%d", i, idx, len(out)-1)
		}
		if out[idx] != nil {
			return fmt.Errorf("index %d appears twice", idx)
		}
		if len(d.Embedding) == 0 {
			return fmt.Errorf("embedding for index %d is empty", idx)
		}
		if dim < 0 {
			dim = len(d.Embedding)
		} else if len(d.Embedding) != dim {
			return fmt.Errorf("embedding for index %d has %d dimensions, others have %d", idx, len(d.Embedding), dim)
		}
		out[idx] = d.Embedding
	}
	return nil
}

var errNonFinite = errors.New("not a finite number")

// nonFiniteAt names the literal NaN or Infinity that Python-based servers
// write for non-finite floats, when the JSON syntax error at offset is one.
func nonFiniteAt(data []byte, offset int64) string {
	// The decoder reports the offset just past the offending byte.
	start := int(offset) - 1
	if start < 0 || start >= len(data) {
		return ""
	}
	if start > 0 && data[start-1] == '-' {
		start--
	}
	rest := data[start:]
	for _, tok := range []string{"NaN", "-NaN", "Infinity", "-Infinity"} {
		if bytes.HasPrefix(rest, []byte(tok)) {
			return tok
		}
	}
	return ""
}

// floatVector decodes a JSON array of numbers into float32s, reporting values
// outside float32's range as non-finite rather than as a type error.
type floatVector []float32

func (v *floatVector) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return fmt.Errorf("embedding is not an array")
	}
	inner := bytes.TrimSpace(b[1 : len(b)-1])
	if len(inner) == 0 {
		*v = floatVector{}
		return nil
	}
	vec := make([]float32, 0, bytes.Count(inner, []byte{','})+1)
	for i := 0; len(inner) > 0; i++ {
		tok := inner
		if j := bytes.IndexByte(inner, ','); j >= 0 {
			tok, inner = inner[:j], inner[j+1:]
		} else {
			inner = nil
		}
		tok = bytes.TrimSpace(tok)
		f, err := strconv.ParseFloat(string(tok), 32)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("embedding value %d (%s) out of float32 range: %w", i, tok, errNonFinite)
			}
			return fmt.Errorf("embedding value %d (%.20s) is not a number", i, tok)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("embedding value %d: %w", i, errNonFinite)
		}
		vec = append(vec, float32(f))
	}
	*v = slices.Clip(vec)
	return nil
}
