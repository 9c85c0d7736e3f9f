package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/headless"
	"github.com/assistantcms/cms/internal/localstack"
)

// runtimePage is what a browser runtime does on start and on one turn:
// send the turn's events (a PUT with a token and a JSON body, so
// preflighted), read suggestions, search and content, and read the
// answers' status, body and exposed headers. Its last call is simple (no
// token, no body): the browser sends it without a preflight and only the
// answer's headers decide whether the page may read it. Then it reports
// everything to its own origin.
const runtimePage = `<!doctype html>
<title>runtime</title>
<script>
const params = new URLSearchParams(location.search);
const base = params.get("base"), token = params.get("token");
async function call(name, method, path, body, authorized = true) {
  const init = {method, headers: {}};
  if (authorized) init.headers["Authorization"] = "Bearer " + token;
  if (body) {
    init.headers["Content-Type"] = "application/json";
    init.body = body;
  }
  try {
    const r = await fetch(base + path, init);
    return {name, status: r.status, body: await r.text(), requestId: r.headers.get("X-Request-Id"),
      etag: r.headers.get("ETag"), vary: r.headers.get("Vary")};
  } catch (e) {
    return {name, error: String(e)};
  }
}
(async () => {
  const calls = [];
  calls.push(await call("events", "PUT", "/cms/app/events",
    JSON.stringify({events: [{type: "REQUEST", name: "LAUNCH_REQUEST", channel: "web", platform: "web", sessionId: "s1", userId: "u1"}]})));
  calls.push(await call("suggestions", "GET", "/cms/suggestions?key=demo-web-chat&queryText=open"));
  calls.push(await call("search", "GET", "/cms/search?" + new URLSearchParams({question: "opening hours"})));
  calls.push(await call("handlers", "GET", "/cms/handler"));
  calls.push(await call("simple", "GET", "/cms/search?question=hours", null, false));
  await fetch("/report", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({origin: location.origin, calls})});
})();
</script>
`

// browserCall is one call as the page's script saw it; nil headers are
// ones the script could not read.
type browserCall struct {
	Name      string  `json:"name"`
	Status    int     `json:"status"`
	Body      string  `json:"body"`
	RequestID *string `json:"requestId"`
	ETag      *string `json:"etag"`
	Vary      *string `json:"vary"`
	Error     string  `json:"error"`
}

type pageReport struct {
	Origin string        `json:"origin"`
	Calls  []browserCall `json:"calls"`
}

func (r pageReport) call(t *testing.T, name string) browserCall {
	t.Helper()
	for _, c := range r.Calls {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the page reported no %s call: %+v", name, r)
	return browserCall{}
}

// page serves runtimePage on its own loopback origin and receives what
// the page reports.
type page struct {
	srv     *httptest.Server
	reports chan pageReport
}

func newPage(t *testing.T) *page {
	t.Helper()
	p := &page{reports: make(chan pageReport, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, runtimePage)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		var rep pageReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case p.reports <- rep:
		default: // one report per load; a second is a reload's
		}
		w.WriteHeader(http.StatusNoContent)
	})
	p.srv = httptest.NewServer(mux) // 127.0.0.1, a port of its own: an origin of its own
	t.Cleanup(p.srv.Close)
	return p
}

func (p *page) origin() string { return p.srv.URL }

// open loads the page in headless Chromium, pointed at base with token,
// and returns its report once it arrives.
func (p *page) open(ctx context.Context, t *testing.T, base, token string) pageReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out := &childproc.Output{}
	cmd := headless.Command(ctx, t, p.srv.URL+"/?"+url.Values{"base": {base}, "token": {token}}.Encode())
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// Chromium runs until told to stop: ended once the report is in.
	defer func() {
		cancel()
		<-exited
	}()
	select {
	case rep := <-p.reports:
		return rep
	case <-exited:
		t.Fatalf("chromium exited before the page reported:\n%s", out.String())
	case <-ctx.Done():
		t.Fatalf("no report from the page on %s: %v\n%s", p.origin(), ctx.Err(), out.String())
	}
	return pageReport{}
}

// TestBrowserCORS runs the product with one origin allowed at the gateway
// and loads a runtime's page from that origin and from another in a real
// browser. The allowed page sends events, reads suggestions, search and
// content and reads the headers it needs; the other page's calls all
// fail. Ingest and the api allow any origin, so the answers the browser
// accepts show the gateway's policy, stated once.
func TestBrowserCORS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	allowed, other := newPage(t), newPage(t)
	logs := &childproc.Output{}
	st, err := localstack.Start(ctx, localstack.Options{
		Dir:     t.TempDir(),
		Content: "demo/content.yaml",
		Env: map[string][]string{
			"gateway": {"CORS_ALLOWED_ORIGINS=" + allowed.origin()},
			"ingest":  {"CORS_ALLOWED_ORIGINS=*"},
			"api":     {"CORS_ALLOWED_ORIGINS=*"},
		},
		Log: func(string) io.Writer { return logs },
	})
	if err != nil {
		t.Fatalf("start the local stack: %v\n%s", err, logs.String())
	}
	t.Cleanup(st.Stop)
	one := "http://" + st.Gateway

	t.Run("allowed origin", func(t *testing.T) {
		rep := allowed.open(ctx, t, one, st.Token)
		if rep.Origin != allowed.origin() {
			t.Errorf("report from %q, want %q", rep.Origin, allowed.origin())
		}
		for _, c := range rep.Calls {
			if c.Error != "" {
				t.Errorf("%s: the browser refused it: %s", c.Name, c.Error)
			}
		}
		if c := rep.call(t, "events"); c.Status != http.StatusOK || !strings.Contains(c.Body, `"accepted":1`) {
			t.Errorf("events: %d %s", c.Status, c.Body)
		}
		for _, tc := range []struct{ name, inBody string }{
			{"suggestions", `"suggestions":[{`},
			{"search", `"documents":[{`},
			{"handlers", `"handlers":[{`},
		} {
			c := rep.call(t, tc.name)
			if c.Status != http.StatusOK || !strings.Contains(c.Body, tc.inBody) {
				t.Errorf("%s: %d %.200s", tc.name, c.Status, c.Body)
			}
			if c.RequestID == nil || *c.RequestID == "" {
				t.Errorf("%s: X-Request-Id not readable", tc.name)
			}
			// Vary is sent, but not exposed: what the script reads is
			// what the policy exposes, no more.
			if c.Vary != nil {
				t.Errorf("%s: Vary readable (%q), though not exposed", tc.name, *c.Vary)
			}
		}
		if c := rep.call(t, "handlers"); c.ETag == nil || !strings.HasPrefix(*c.ETag, `"`) {
			t.Errorf("handlers: ETag not readable: %v", c.ETag)
		}
		if c := rep.call(t, "simple"); c.Status != http.StatusUnauthorized || !strings.Contains(c.Body, `"message":"Unauthorized"`) {
			t.Errorf("call without a token: %d %s, want the 401 readable", c.Status, c.Body)
		}
	})

	t.Run("origin not allowed", func(t *testing.T) {
		rep := other.open(ctx, t, one, st.Token)
		if len(rep.Calls) != 5 {
			t.Fatalf("%d calls reported: %+v", len(rep.Calls), rep)
		}
		for _, c := range rep.Calls {
			if c.Error == "" || c.Status != 0 {
				t.Errorf("%s: the page read an answer (%d %.100s); want the fetch to fail", c.Name, c.Status, c.Body)
			}
		}
	})

	t.Run("what the browser relied on", func(t *testing.T) {
		// The api itself would allow the other origin: the gateway's
		// policy is the one that counts.
		if r := do(t, http.MethodGet, "http://"+st.API+"/cms/handler", st.Token, "", "Origin", other.origin()); r.header.Get("Access-Control-Allow-Origin") != other.origin() {
			t.Fatalf("api: %d %v; want it to allow any origin", r.code, r.header)
		}
		for _, tc := range []struct {
			method, path, body, origin string
			status                     int
			allowOrigin                []string
		}{
			{http.MethodGet, "/cms/handler", "", allowed.origin(), http.StatusOK, []string{allowed.origin()}},
			{http.MethodPut, "/cms/app/events", `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s2","userId":"u1"}]}`,
				allowed.origin(), http.StatusOK, []string{allowed.origin()}},
			{http.MethodGet, "/cms/handler", "", other.origin(), http.StatusOK, nil},
		} {
			r := do(t, tc.method, one+tc.path, st.Token, tc.body, "Origin", tc.origin)
			if got := r.header.Values("Access-Control-Allow-Origin"); r.code != tc.status || strings.Join(got, " ") != strings.Join(tc.allowOrigin, " ") {
				t.Errorf("%s %s from %s: %d, Access-Control-Allow-Origin %q; want %d, %q", tc.method, tc.path, tc.origin, r.code, got, tc.status, tc.allowOrigin)
			}
		}
		r := do(t, http.MethodOptions, one+"/cms/app/events", "", "", "Origin", other.origin(), "Access-Control-Request-Method", "PUT")
		if r.code != http.StatusForbidden || !strings.Contains(r.body, `"httpStatus":403`) || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from an origin not allowed: %d %v %s", r.code, r.header, r.body)
		}
	})
}
