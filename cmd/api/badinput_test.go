package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
)

// The server limits the bad-input test runs with, set through the
// environment: shorter than the defaults, so that the test shows they
// reach the servers and stays quick.
const (
	testReadHeaderTimeout = time.Second
	testReadTimeout       = 2 * time.Second
	testIdleTimeout       = 2 * time.Second
	testMaxHeaderBytes    = 16 << 10
	testGraphQLMaxBody    = 1 << 20
	// Peak resident memory each process must stay under, all cases
	// included; the largest request held is a 1 MiB GraphQL body.
	maxPeakRSS = 96 << 20
	// wordNetRSS is what the api holds more: WordNet's related words
	// (about 23 MiB kept, more while it is read).
	wordNetRSS = 32 << 20
	// encoderRSS is what the sentence encoder holds: its weights, packed
	// (28 MiB), and its workers' buffers.
	encoderRSS = 48 << 20
)

// TestBadInputOverHTTP runs api serve on PostgreSQL and api gateway in
// front of it as real processes, and sends both what careless and
// hostile clients send: oversized headers and query strings, NUL and
// invalid UTF-8 in parameters and path IDs, very long IDs, huge and
// deeply nested GraphQL bodies, headers and bodies trickled in, idle
// connections. Each gets a clear 4xx (or is cut off by a server timeout
// within its bound), never a 5xx; afterwards both processes still answer,
// and their peak resident memory stays under maxPeakRSS.
func TestBadInputOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := startPostgres(ctx, t)
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	admin := func(args ...string) string {
		t.Helper()
		return runAdmin(ctx, t, bin, dsn, args...)
	}
	admin("import", "../../deploy/demo/content.yaml")
	appToken := admin("demo", "--quiet")
	orgToken := admin("token", "create", "--org", "demo-org", "--quiet")

	limits := []string{
		"HTTP_READ_HEADER_TIMEOUT=" + testReadHeaderTimeout.String(), "HTTP_READ_TIMEOUT=" + testReadTimeout.String(),
		"HTTP_WRITE_TIMEOUT=5s", "HTTP_IDLE_TIMEOUT=" + testIdleTimeout.String(), "HTTP_MAX_HEADER_BYTES=" + strconv.Itoa(testMaxHeaderBytes),
	}
	type proc struct {
		name, addr string
		p          *childproc.Proc
		logs       *childproc.Output
	}
	start := func(name string, args []string, env ...string) proc {
		t.Helper()
		port, err := devbroker.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(append(append(os.Environ(), "API_ADDR="+addr, "GATEWAY_ADDR="+addr), limits...), env...)
		p := startProcess(ctx, t, name, cmd, "http://"+addr+"/healthz")
		return proc{name, addr, p, cmd.Stdout.(*childproc.Output)}
	}
	api := start("api", []string{"serve"}, "CONTENT_DB="+dsn, "RATE_LIMIT_RPS=0", "GRAPHQL_MAX_BODY_BYTES="+strconv.Itoa(testGraphQLMaxBody),
		"GRAPHQL_MAX_COST=5000", "GRAPHQL_LIST_SIZE=50", "GRAPHQL_MAX_ANSWER_BYTES=65536")
	// The app's content is embedded before the cases: a first search
	// waits for it, which on a loaded machine outlasts the limits the
	// cases hold (the gateway's 3 s response timeout, the api's 5 s
	// write timeout).
	waitUntil(t, 3*time.Minute, "a search ranked by meaning", func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api.addr+"/cms/search?question=opening+hours", nil)
		req.Header.Set("Authorization", "Bearer "+appToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && resp.Header.Get("X-Retrieval") == "hybrid"
	})
	// Ingest is not running: nothing here goes to it.
	ingestPort, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	gateway := start("gateway", []string{"gateway"}, "API_URL=http://"+api.addr,
		fmt.Sprintf("INGEST_URL=http://127.0.0.1:%d", ingestPort), "GATEWAY_RESPONSE_TIMEOUT=3s")

	get := func(path, token string, headers ...string) []byte {
		var b strings.Builder
		b.WriteString("GET " + path + " HTTP/1.1\r\nHost: cms.test\r\nConnection: close\r\nAccept: application/json\r\n")
		if token != "" {
			b.WriteString("Authorization: Bearer " + token + "\r\n")
		}
		for _, h := range headers {
			b.WriteString(h + "\r\n")
		}
		return []byte(b.String() + "\r\n")
	}
	postGraphQL := func(token, body string, chunked bool) []byte {
		head := "POST /cms/graphql HTTP/1.1\r\nHost: cms.test\r\nConnection: close\r\nContent-Type: application/json\r\nAuthorization: Bearer " + token + "\r\n"
		if !chunked {
			return []byte(head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		}
		var b strings.Builder
		b.WriteString(head + "Transfer-Encoding: chunked\r\n\r\n")
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		b.WriteString("0\r\n\r\n")
		return []byte(b.String())
	}
	graphQL := func(query string) string {
		b, _ := json.Marshal(map[string]string{"query": query})
		return string(b)
	}
	nested := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	aliases := func(n int, field string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " a%d: %s", i, field)
		}
		return "{" + b.String() + " }"
	}
	// doubling nests introspection whose answer doubles with each level.
	doubling := func(levels int) string {
		inner := "name"
		for range levels {
			inner = "fields { name type { ofType { ofType { " + inner + " } } } }"
		}
		return `{ __type(name: "__Type") { ` + inner + ` } }`
	}

	type badCase struct {
		name string
		req  []byte
		// status is the answer wanted; text is in its body, field is the
		// error's field (REST JSON), code the GraphQL error code.
		status            int
		text, field, code string
	}
	cases := []badCase{
		{name: "header over the limit", req: get("/cms/app", appToken, "X-Big: "+strings.Repeat("b", 2*testMaxHeaderBytes)),
			status: 431, text: "Request Header Fields Too Large"},
		{name: "huge header", req: get("/cms/app", appToken, "X-Big: "+strings.Repeat("b", 1<<20)), status: 431, text: "Request Header Fields Too Large"},
		{name: "many headers", req: get("/cms/app", appToken, strings.Split(strings.Repeat("X-H: v\n", 5000), "\n")...),
			status: 431, text: "Request Header Fields Too Large"},
		{name: "huge query string", req: get("/cms/search?question="+strings.Repeat("q", 200<<10), appToken), status: 431, text: "Request Header Fields Too Large"},
		// A question over its limit is searched on its first part, not refused.
		{name: "question over its limit", req: get("/cms/search?question="+strings.Repeat("q", 8000), appToken), status: 200, text: `"documents"`},
		{name: "NUL in a path ID", req: get("/cms/handler/Opening%00Hours", appToken), status: 404, text: "Handler not found."},
		{name: "invalid UTF-8 in a path ID", req: get("/cms/handler/%ff%fe", appToken), status: 404, text: "Handler not found."},
		{name: "raw invalid UTF-8 in the path", req: get("/cms/entity/\xff\xfe", appToken), status: 404, text: "Entity not found."},
		{name: "raw NUL in the request line", req: get("/cms/handler/a\x00b", appToken), status: 400, text: "Bad Request"},
		{name: "very long path ID", req: get("/cms/handler/"+strings.Repeat("x", 5000), appToken), status: 404, text: "Handler not found."},
		{name: "very long multi-byte path ID", req: get("/cms/entity/"+strings.Repeat("%C3%A9", 1500), appToken), status: 404, text: "Entity not found."},
		{name: "NUL in appId", req: get("/cms/handler?appId=demo%00app", orgToken), status: 403, field: "appId", text: "not an app of this token's organization"},
		{name: "invalid UTF-8 in appId", req: get("/cms/handler?appId=%ff", orgToken), status: 403, field: "appId", text: "not an app of this token's organization"},
		{name: "very long appId", req: get("/cms/handler?appId="+strings.Repeat("a", 5000), orgToken), status: 403, field: "appId", text: "not an app of this token's organization"},
		{name: "very long appId, app token", req: get("/cms/app?appId="+strings.Repeat("a", 5000), appToken), status: 403, field: "appId", text: "cannot act for another app"},
		{name: "NUL in a channel key", req: get("/cms/suggestions?key=demo-web-chat%00&queryText=open", appToken), status: 400, field: "key", text: "without NUL"},
		{name: "invalid UTF-8 in a channel key", req: get("/cms/suggestions?key=%ff&queryText=open", appToken), status: 400, field: "key", text: "UTF-8"},
		{name: "invalid UTF-8 in queryText", req: get("/cms/suggestions?key=demo-web-chat&queryText=%ff", appToken), status: 400, field: "queryText", text: "UTF-8"},
		{name: "invalid UTF-8 in a question", req: get("/cms/search?question=%ff%fe", appToken), status: 400, field: "question", text: "UTF-8"},
		{name: "NUL in a question", req: get("/cms/faq/query?question=open%00ing", appToken), status: 400, field: "question", text: "without NUL"},
		{name: "NUL in locationId", req: get("/cms/rag?question=parking&locationId=%00", appToken), status: 400, field: "locationId", text: "without NUL"},
		{name: "NUL in a GraphQL appId", req: postGraphQL(orgToken, graphQL(`{ handlers(appId: "demo\u0000app") { intentId } }`), false),
			status: 200, code: "FORBIDDEN"},
		{name: "GraphQL body over the limit", req: postGraphQL(appToken, graphQL("{ handlers { intentId } }"+strings.Repeat(" ", 3*testGraphQLMaxBody)), false),
			status: 413, code: "REQUEST_TOO_LARGE"},
		{name: "chunked GraphQL body over the limit", req: postGraphQL(appToken, graphQL("{ handlers { intentId } }"+strings.Repeat(" ", 3*testGraphQLMaxBody)), true),
			status: 413, code: "REQUEST_TOO_LARGE"},
		{name: "deeply nested JSON", req: postGraphQL(appToken, `{"query":"{ handlers { intentId } }","variables":{"v":`+nested("[", "]", 100_000)+`}}`, false),
			status: 400, code: "BAD_REQUEST"},
		// Refused before parsing when the nesting is measured first, by
		// validation otherwise.
		{name: "deeply nested selection", req: postGraphQL(appToken, graphQL("{ handlers "+nested("{ intentId ", "}", 20_000)+" }"), false),
			status: 400, code: "QUERY_TOO_DEEP|GRAPHQL_VALIDATION_FAILED"},
		{name: "deeply nested argument", req: postGraphQL(appToken, graphQL(`{ handler(intentId: `+nested("[", "]", 50_000)+`) { intentId } }`), false),
			status: 400, code: "QUERY_TOO_DEEP|GRAPHQL_VALIDATION_FAILED"},
		// The limits on what one answer costs, set through the environment.
		{name: "introspection doubling 14 levels", req: postGraphQL(appToken, graphQL(doubling(14)), false),
			status: 400, code: "QUERY_TOO_DEEP", text: "introspection fields 20 (GRAPHQL_MAX_INTROSPECTION_DEPTH)"},
		{name: "introspection under aliases", req: postGraphQL(appToken, graphQL(aliases(6, `__schema { types { fields { type { ofType { ofType { fields { type { ofType { ofType { `+
			`fields { type { ofType { ofType { fields { type { ofType { name } } } } } } } } } } } } } } } } }`)), false),
			status: 400, code: "QUERY_TOO_COMPLEX", text: "the request costs 7920, more than the 5000 allowed (GRAPHQL_MAX_COST)"},
		{name: "lists weighed", req: postGraphQL(appToken, graphQL(`{ handlers { content { key handlerResponse } } }`), false),
			status: 400, code: "QUERY_TOO_COMPLEX", text: "the request costs 5051, more than the 5000 allowed (GRAPHQL_MAX_COST)"},
		{name: "aliases of every handler's document", req: postGraphQL(appToken, graphQL(aliases(20, `handlers { document }`)), false),
			status: 422, code: "ANSWER_TOO_LARGE", text: "larger than 65536 bytes (GRAPHQL_MAX_ANSWER_BYTES)"},
		{name: "a read within the limits", req: postGraphQL(appToken, graphQL(`{ handlers { intentId content { key } } }`), false),
			status: 200, text: `"intentId":"OpeningHours"`},
	}
	for _, target := range []proc{api, gateway} {
		t.Run(target.name, func(t *testing.T) {
			for _, c := range cases {
				started := time.Now()
				resp, body, err := rawExchange(target.addr, c.req)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					continue
				}
				took := time.Since(started)
				if resp.StatusCode != c.status || !strings.Contains(body, c.text) {
					t.Errorf("%s: %d %.300q; want %d with %q", c.name, resp.StatusCode, body, c.status, c.text)
					continue
				}
				if c.field != "" || c.code != "" {
					checkJSONError(t, c.name, resp, body, c.field, c.code)
				}
				if took > 5*time.Second {
					t.Errorf("%s took %v", c.name, took)
				}
			}
		})
	}

	// Slow clients, both processes at once: each must be cut off within
	// its timeout (and not much sooner, which would mean something else
	// closed the connection).
	t.Run("slow clients", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, target := range []proc{api, gateway} {
			wg.Go(func() {
				took, err := slowHeaders(target.addr)
				if err == nil {
					err = within(took, testReadHeaderTimeout)
				}
				if err != nil {
					t.Errorf("%s, headers trickled: %v", target.name, err)
				}
			})
			wg.Go(func() {
				// The GraphQL reader answers 400 when its read times out;
				// through the gateway, whose read timeout starts a moment
				// before the api's, the gateway's 408 usually comes first,
				// but on a loaded machine the api's 400 may.
				want := []int{http.StatusBadRequest}
				if target.name == "gateway" {
					want = append(want, http.StatusRequestTimeout)
				}
				took, resp, body, err := slowBody(target.addr, appToken)
				if err == nil {
					err = within(took, testReadTimeout)
				}
				switch {
				case err != nil:
					t.Errorf("%s, body trickled: %v", target.name, err)
				case !slices.Contains(want, resp.StatusCode) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !json.Valid([]byte(body)):
					t.Errorf("%s, body trickled: %d %s %q, want one of %v with a JSON body", target.name, resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
				default:
					t.Logf("%s, body trickled: %d after %v: %s", target.name, resp.StatusCode, took.Round(time.Millisecond), strings.TrimSpace(body))
				}
			})
			wg.Go(func() {
				took, err := idleAfterOneRequest(target.addr)
				if err == nil {
					err = within(took, testIdleTimeout)
				}
				if err != nil {
					t.Errorf("%s, idle connection: %v", target.name, err)
				}
			})
		}
		wg.Wait()
	})

	// Both still answer, content included, and neither panicked.
	for _, target := range []proc{api, gateway} {
		select {
		case <-target.p.Done():
			t.Fatalf("%s exited:\n%s", target.name, target.logs.String())
		default:
		}
		if code := status(ctx, "http://"+target.addr+"/cms/handler/OpeningHours", appToken); code != http.StatusOK {
			t.Errorf("%s after the bad input: handler %d", target.name, code)
		}
		if strings.Contains(target.logs.String(), "panic") {
			t.Errorf("%s logged a panic:\n%s", target.name, target.logs.String())
		}
		peak, err := peakRSS(target.p.PID())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s peak RSS (VmHWM) %.1f MiB", target.name, float64(peak)/(1<<20))
		limit := int64(maxPeakRSS)
		if target.p == api.p {
			limit += wordNetRSS + encoderRSS
		}
		if peak > limit {
			t.Errorf("%s peak RSS %d MiB, over %d MiB", target.name, peak>>20, limit>>20)
		}
	}
	if code := status(ctx, "http://"+api.addr+"/readyz", ""); code != http.StatusOK {
		t.Errorf("api readiness after the bad input: %d", code)
	}
}

// checkJSONError checks an error answer's JSON: the REST shape with the
// field at fault, or GraphQL errors with the code (one of several
// separated by "|").
func checkJSONError(t *testing.T, name string, resp *http.Response, body, field, code string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q", name, ct)
	}
	var v struct {
		ErrorType string `json:"errorType"`
		Message   string `json:"message"`
		Field     string `json:"field"`
		Errors    []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Errorf("%s: body is not JSON: %v: %.300q", name, err, body)
		return
	}
	if code != "" {
		if len(v.Errors) == 0 || !slices.Contains(strings.Split(code, "|"), fmt.Sprint(v.Errors[0].Extensions["code"])) || v.Errors[0].Message == "" {
			t.Errorf("%s: %.300s, want a GraphQL error with code %s", name, body, code)
		}
		return
	}
	if v.ErrorType != "HandledError" || v.Message == "" || v.Field != field {
		t.Errorf("%s: %.300s, want a HandledError naming %s", name, body, field)
	}
	// What the client sent is not echoed at length.
	if len(body) > 1000 {
		t.Errorf("%s: a %d-byte error body", name, len(body))
	}
}

// rawExchange writes req on a new connection and reads one answer. The
// write runs on its own goroutine: a server may answer (431, 413) before
// it has read everything, and the answer must still be read.
func rawExchange(addr string, req []byte) (*http.Response, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, "", fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return nil, "", fmt.Errorf("set deadline: %w", err)
	}
	go func() { _, _ = conn.Write(req) }() // ends with an error once conn is closed
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, "", fmt.Errorf("read answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("read body: %w", err)
	}
	return resp, string(b), nil
}

// within accepts a cut-off between half the timeout and the timeout plus
// a generous allowance for a loaded machine.
func within(took, timeout time.Duration) error {
	if took < timeout/2 || took > timeout+4*time.Second {
		return fmt.Errorf("cut off after %v; want about %v", took.Round(time.Millisecond), timeout)
	}
	return nil
}

// trickle is how often a slow client sends its next few bytes.
const trickle = 100 * time.Millisecond

// slowClientLimit is how long a slow client keeps sending before the test
// gives up on the server cutting it off.
const slowClientLimit = 15 * time.Second

// slowHeaders sends a request line and then one header line at a time,
// never ending the headers, and returns how long the server took to close
// the connection.
func slowHeaders(addr string) (time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: cms.test\r\n"); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	closed := make(chan error, 1)
	go func() {
		b, err := io.ReadAll(conn)
		if errors.Is(err, syscall.ECONNRESET) {
			// Closed while the client was still writing: cut off too.
			err = nil
		}
		if err == nil && len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
			err = fmt.Errorf("the server answered %q", b)
		}
		closed <- err
	}()
	tick := time.NewTicker(trickle)
	defer tick.Stop()
	give := time.After(slowClientLimit)
	for {
		select {
		case err := <-closed:
			return time.Since(start), err
		case <-tick.C:
			_, _ = io.WriteString(conn, "X-Slow: 1\r\n") // fails once the server has closed
		case <-give:
			return 0, fmt.Errorf("the connection is still open after %v", slowClientLimit)
		}
	}
}

// slowBody sends a GraphQL request's headers at once and its body a few
// bytes at a time, and returns the answer and when it came.
func slowBody(addr, token string) (time.Duration, *http.Response, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, "", fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	start := time.Now()
	head := "POST /cms/graphql HTTP/1.1\r\nHost: cms.test\r\nContent-Type: application/json\r\nAuthorization: Bearer " + token +
		"\r\nContent-Length: 100000\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		return 0, nil, "", fmt.Errorf("write: %w", err)
	}
	type answer struct {
		resp *http.Response
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- answer{err: fmt.Errorf("read answer: %w", err)}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{resp, string(b), err}
	}()
	tick := time.NewTicker(trickle)
	defer tick.Stop()
	give := time.After(slowClientLimit)
	body := `{"query":"{ handlers { intentId } }"` + strings.Repeat(" ", 100000)
	for {
		select {
		case a := <-answered:
			return time.Since(start), a.resp, a.body, a.err
		case <-tick.C:
			n := min(10, len(body))
			_, _ = io.WriteString(conn, body[:n])
			body = body[n:]
		case <-give:
			return 0, nil, "", fmt.Errorf("no answer after %v", slowClientLimit)
		}
	}
}

// idleAfterOneRequest sends one request on a kept-alive connection and
// returns how long after the answer the server closed the connection.
func idleAfterOneRequest(addr string) (time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(slowClientLimit)); err != nil {
		return 0, fmt.Errorf("set deadline: %w", err)
	}
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: cms.test\r\n\r\n"); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	answered := time.Now()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/healthz answered %d", resp.StatusCode)
	}
	switch _, err := r.ReadByte(); {
	case err == nil:
		return 0, errors.New("the server sent more after its answer")
	case !errors.Is(err, io.EOF):
		return 0, fmt.Errorf("waiting for the idle connection to close: %w", err)
	}
	return time.Since(answered), nil
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in the process status")
}
