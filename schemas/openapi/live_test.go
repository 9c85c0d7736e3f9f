package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/schemas/openapi"
)

// exchange is one request of the live test and the status it must get.
type exchange struct {
	name           string
	method, target string
	header         http.Header
	body           string
	status         int
	// offContract marks a request that breaks the contract on purpose
	// (no token, a body the schemas refuse): the validator must refuse
	// the request, and the answer must still be a documented one.
	offContract bool
	// contains is a part the answer's body must hold, so that the
	// schemas of non-empty answers are exercised.
	contains string
	// operator sends the request to the api's operator address: the
	// gateway serves clients /cms/... paths, health and the contract only.
	operator bool
	// revalidate sends If-None-Match with the ETag an earlier exchange
	// of this target got.
	revalidate string
}

// TestLiveStackMatchesContract starts the whole stack with the demo
// content and sends a request to every documented operation through the
// gateway, good ones and bad ones, validating every request and answer
// against the served document.
func TestLiveStackMatchesContract(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	content, err := filepath.Abs("../../deploy/demo/content.yaml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &childproc.Output{}
	st, err := localstack.Start(ctx, localstack.Options{Dir: t.TempDir(), Content: content,
		Log: func(string) io.Writer { return logs }})
	if err != nil {
		t.Fatalf("start the local stack: %v\n%s", err, logs.String())
	}
	t.Cleanup(st.Stop)
	orgToken := createOrgToken(ctx, t, st)
	base := "http://" + st.Gateway

	// The api serves the document the tests validate against.
	served := get(ctx, t, base+openapi.Path)
	if !bytes.Equal(served, openapi.Bundled()) {
		t.Fatalf("GET %s differs from the bundled document", openapi.Path)
	}
	v := newValidator(t, served)
	_, m, err := load(served, "")
	if err != nil {
		t.Fatal(err)
	}
	ops := operations(m)

	app := http.Header{"Authorization": {"Bearer " + st.Token}}
	org := http.Header{"Authorization": {"Bearer " + orgToken}}
	manage := http.Header{"Authorization": {"Bearer " + st.ManagementToken}}
	// Tokens that lack a scope some operation needs.
	writer := http.Header{"Authorization": {"Bearer " + createToken(ctx, t, st, "--app", "demo-app", "--scopes", "content:read,content:write")}}
	sender := http.Header{"Authorization": {"Bearer " + createToken(ctx, t, st, "--app", "demo-app", "--scopes", "events:write")}}
	json := func(h http.Header) http.Header {
		if h = h.Clone(); h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/json")
		return h
	}
	// A revision of a record, for the difference of a revision with
	// itself (no changes).
	helpRevision := newestRevision(ctx, t, base+"/cms/history/handler/HelpIntent", manage)
	const event = `{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s1","userId":"u1","selectedHandler":"LaunchRequest"}`
	exchanges := []exchange{
		{name: "events", method: "PUT", target: "/cms/app/events", header: json(app), body: `{"events":[` + event + `]}`, status: 200},
		{name: "events, plural path, organization token", method: "PUT", target: "/cms/apps/events?appId=demo-app", header: json(org), body: `{"events":[` + event + `]}`, status: 200},
		{name: "events, Authorize header", method: "PUT", target: "/cms/app/events", header: http.Header{"Authorize": {"Bearer " + st.Token}, "Content-Type": {"application/json"}}, body: `{"events":[` + event + `]}`, status: 200},
		{name: "events, one invalid", method: "PUT", target: "/cms/app/events", header: json(app), body: `{"events":[` + event + `,{"type":"REQUEST"}]}`, status: 200, offContract: true},
		{name: "events, strict, one invalid", method: "PUT", target: "/cms/app/events?strict=true", header: json(app), body: `{"events":[{"type":"REQUEST"}]}`, status: 422, offContract: true},
		{name: "events, no token", method: "PUT", target: "/cms/app/events", header: json(nil), body: `{"events":[` + event + `]}`, status: 401, offContract: true},
		{name: "events, malformed body", method: "PUT", target: "/cms/app/events", header: json(app), body: `{"events":[`, status: 400, offContract: true},
		{name: "events, empty batch", method: "PUT", target: "/cms/app/events", header: json(app), body: `{"events":[]}`, status: 400, offContract: true},
		{name: "events, organization token without appId", method: "PUT", target: "/cms/app/events", header: json(org), body: `{"events":[` + event + `]}`, status: 400},
		{name: "events, another app", method: "PUT", target: "/cms/app/events?appId=other-app", header: json(app), body: `{"events":[` + event + `]}`, status: 403},
		{name: "events, token without events:write", method: "PUT", target: "/cms/app/events", header: json(writer), body: `{"events":[` + event + `]}`, status: 403, contains: "events:write"},
		{name: "events, text body", method: "PUT", target: "/cms/app/events", header: http.Header{"Authorization": app["Authorization"], "Content-Type": {"text/plain"}}, body: `{"events":[` + event + `]}`, status: 415, offContract: true},

		{name: "app", method: "GET", target: "/cms/app", header: app, status: 200},
		{name: "app, revalidated", method: "GET", target: "/cms/app", header: app, status: 304, revalidate: "/cms/app"},
		{name: "app, organization token", method: "GET", target: "/cms/app?appId=demo-app", header: org, status: 200},
		{name: "app, organization token without appId", method: "GET", target: "/cms/app", header: org, status: 400},
		{name: "app, no token", method: "GET", target: "/cms/app", status: 401, offContract: true},
		{name: "app, bad token", method: "GET", target: "/cms/app", header: http.Header{"Authorization": {"Bearer cms_0000000000000000_nope"}}, status: 401},
		{name: "app, another app", method: "GET", target: "/cms/app?appId=other-app", header: app, status: 403},
		{name: "app, token without content:read", method: "GET", target: "/cms/app", header: sender, status: 403, contains: "content:read"},
		{name: "handlers", method: "GET", target: "/cms/handler", header: app, status: 200},
		{name: "handler", method: "GET", target: "/cms/handler/HelpIntent", header: app, status: 200},
		{name: "handler, revalidated", method: "GET", target: "/cms/handler/HelpIntent", header: app, status: 304, revalidate: "/cms/handler/HelpIntent"},
		{name: "handler, unknown", method: "GET", target: "/cms/handler/NoSuchIntent", header: app, status: 404},
		{name: "entities", method: "GET", target: "/cms/entity", header: app, status: 200},
		{name: "entity", method: "GET", target: "/cms/entity/BIKE_TYPE", header: app, status: 200},
		{name: "entity, unknown", method: "GET", target: "/cms/entity/NO_SUCH", header: app, status: 404},
		{name: "entity, organization token without appId", method: "GET", target: "/cms/entity/BIKE_TYPE", header: org, status: 400},
		{name: "entity, unknown, organization token", method: "GET", target: "/cms/entity/NO_SUCH?appId=demo-app", header: org, status: 404},

		{name: "search", method: "GET", target: "/cms/search?question=where+is+the+downtown+store", header: app, status: 200, contains: `"highlights":[{`},
		{name: "search, location", method: "GET", target: "/cms/search?question=opening+hours&locationId=downtown", header: app, status: 200},
		{name: "search, no question", method: "GET", target: "/cms/search", header: app, status: 400, offContract: true},
		{name: "faq", method: "GET", target: "/cms/faq/query?question=can+I+return+a+bike&size=3", header: app, status: 200, contains: `"_score"`},
		{name: "faq, size too large", method: "GET", target: "/cms/faq/query?question=return&size=1000", header: app, status: 400, offContract: true},
		{name: "rag", method: "GET", target: "/cms/rag?question=what+is+your+return+policy&temperature=undefined&useRetrievalApi=true", header: app, status: 200, contains: `"hasAnswer":true`},
		{name: "rag, nothing matches", method: "GET", target: "/cms/rag?question=zebra+quantum+saxophone", header: app, status: 200},
		{name: "suggestions", method: "GET", target: "/cms/suggestions?key=demo-web-chat&queryText=ret", header: app, status: 200, contains: `"bold"`},
		{name: "suggestions, types", method: "GET", target: "/cms/suggestions?key=demo-web-chat&queryText=help&type=INTENT,FAQ&size=3", header: app, status: 200},
		{name: "suggestions, unknown type", method: "GET", target: "/cms/suggestions?key=demo-web-chat&queryText=help&type=BOGUS", header: app, status: 400},
		{name: "suggestions, unknown key", method: "GET", target: "/cms/suggestions?key=no-such-key&queryText=help", header: app, status: 404},

		{name: "history", method: "GET", target: "/cms/history/handler/HelpIntent", header: manage, status: 200, contains: `"revisions":[{`},
		{name: "history, diff", method: "GET", target: fmt.Sprintf("/cms/history/handler/HelpIntent/diff?from=%d&to=%d", helpRevision, helpRevision), header: manage, status: 200, contains: `{"changes":[]}`},
		{name: "history, unknown revision", method: "GET", target: "/cms/history/handler/HelpIntent/diff?from=0&to=999999", header: manage, status: 404},
		{name: "history, runtime token", method: "GET", target: "/cms/history/handler/HelpIntent", header: app, status: 403, contains: "content:write"},
		{name: "audit", method: "GET", target: "/cms/audit?limit=5", header: manage, status: 200, contains: `"entries":[{`},
		{name: "audit, bad time", method: "GET", target: "/cms/audit?from=yesterday", header: manage, status: 400},
		{name: "audit, runtime token", method: "GET", target: "/cms/audit", header: app, status: 403, contains: "content:write"},

		{name: "graphql", method: "POST", target: "/cms/graphql", header: json(app), body: `{"query":"{ handlers { intentId } }"}`, status: 200},
		{name: "graphql, parse error", method: "POST", target: "/cms/graphql", header: json(app), body: `{"query":"{ handlers { "}`, status: 400},
		{name: "graphql, no token", method: "POST", target: "/cms/graphql", header: json(nil), body: `{"query":"{ handlers { intentId } }"}`, status: 401, offContract: true},
		{name: "graphql mutation, runtime token", method: "POST", target: "/cms/graphql", header: json(app), body: `{"query":"mutation { deleteHandler(handlerId: \"HelpIntent\") { intentId } }"}`, status: 403, contains: "INSUFFICIENT_SCOPE"},
		{name: "graphql mutation, management token", method: "POST", target: "/cms/graphql", header: json(manage), body: `{"query":"mutation { addIntent(intent: {intentId: \"ContractTest\"}) { intentId } }"}`, status: 200, contains: "ContractTest"},
		{name: "graphql, GET query", method: "GET", target: "/cms/graphql?query=%7Bentities%7BentityId%7D%7D", header: app, status: 200},
		{name: "graphiql", method: "GET", target: "/cms/graphql", header: http.Header{"Accept": {"text/html"}}, status: 200},
		{name: "graphiql asset", method: "GET", target: "/cms/graphql/assets/graphiql.min.css", status: 200},

		{name: "live events page", method: "GET", target: "/cms/app/events/live", header: http.Header{"Accept": {"text/html"}}, status: 200, contains: "<title>Live events"},
		{name: "live events page's script", method: "GET", target: "/cms/app/events/live/page.js", status: 200},
		{name: "live events, runtime token", method: "GET", target: "/cms/app/events/live", header: app, status: 403, contains: "events:read"},
		{name: "live events, another app", method: "GET", target: "/cms/app/events/live?appId=other-app", header: manage, status: 403},
		// The page needs no token, so the document lets the path go without one.
		{name: "live events, no token", method: "GET", target: "/cms/app/events/live", status: 401},
		{name: "live events, bad limit", method: "GET", target: "/cms/app/events/live?limit=0", header: manage, status: 400, offContract: true},

		{name: "healthz", method: "GET", target: "/healthz", status: 200},
		{name: "readyz", method: "GET", target: "/readyz", status: 200},
		{name: "metrics", operator: true, method: "GET", target: "/metrics", status: 200},
		{name: "status", operator: true, method: "GET", target: "/status", status: 200},
		{name: "status data", operator: true, method: "GET", target: "/status/data", status: 200},
		{name: "authors' page", method: "GET", target: "/cms/analytics", header: http.Header{"Accept": {"text/html"}}, status: 200, contains: "<title>Analytics"},
		{name: "authors' page's script", method: "GET", target: "/cms/analytics/page.js", status: 200},
		{name: "authors' report, as the page's address", method: "GET", target: "/cms/analytics?days=7", header: manage, status: 200, contains: `"appId":"demo-app"`},
		{name: "authors' report", method: "GET", target: "/cms/analytics/report?days=7", header: manage, status: 200, contains: `"totals"`},
		{name: "authors' report, runtime token", method: "GET", target: "/cms/analytics/report", header: app, status: 403, contains: "events:read"},
		{name: "authors' report, another app", method: "GET", target: "/cms/analytics/report?appId=other-app", header: manage, status: 403},
		{name: "authors' report, no token", method: "GET", target: "/cms/analytics/report", status: 401, offContract: true},
		{name: "gap inbox", method: "GET", target: "/cms/analytics/gaps?days=7&state=all", header: manage, status: 200, contains: `"groups":[`},
		{name: "gap inbox, runtime token", method: "GET", target: "/cms/analytics/gaps", header: app, status: 403, contains: "events:read"},
		{name: "gap inbox, threshold between bands", method: "GET", target: "/cms/analytics/gaps?lowConfidence=0.33", header: manage, status: 400, contains: "lowConfidence"},
		{name: "gap inbox, organization token without events:read", method: "GET", target: "/cms/analytics/gaps?appId=demo-app", header: org, status: 403, contains: "events:read"},
		{name: "authors' page's style sheet", method: "GET", target: "/cms/analytics/page.css", status: 200},
		{name: "sessions", method: "GET", target: "/cms/analytics/sessions?days=1", header: manage, status: 200, contains: `"sessions":[`},
		{name: "sessions, bad outcome", method: "GET", target: "/cms/analytics/sessions?outcome=lost", header: manage, status: 400, offContract: true},
		{name: "conversation", method: "GET", target: "/cms/analytics/conversation?session=s1", header: manage, status: 200, contains: `"turns":[`},
		{name: "conversation, no session", method: "GET", target: "/cms/analytics/conversation", header: manage, status: 400, offContract: true},
		{name: "sample conversations", method: "GET", target: "/cms/analytics/samples?wording=where+is+my+order&day=" + time.Now().UTC().Format(time.DateOnly), header: manage, status: 200, contains: `"sessions":[`},
		{name: "sample conversations, runtime token", method: "GET", target: "/cms/analytics/samples?wording=x&day=2026-01-01", header: app, status: 403},
		{name: "analytics", operator: true, method: "GET", target: "/analytics?app=demo-app", status: 200},
		{name: "analytics data", operator: true, method: "GET", target: "/analytics/data?app=demo-app&days=7", status: 200},
		{name: "analytics data, bad days", operator: true, method: "GET", target: "/analytics/data?app=demo-app&days=0", status: 400, offContract: true},
		{name: "openapi", method: "GET", target: openapi.Path, status: 200},
		{name: "openapi, revalidated", method: "GET", target: openapi.Path, status: 304, revalidate: openapi.Path},
	}

	etags := map[string]string{}
	answered := map[string]bool{}
	for _, x := range exchanges {
		t.Run(x.name, func(t *testing.T) {
			to := base
			if x.operator {
				to = "http://" + st.APIOperator
			}
			req, resp := x.send(ctx, t, to, etags)
			if resp.StatusCode != x.status {
				t.Fatalf("%s %s: status %d, want %d", x.method, x.target, resp.StatusCode, x.status)
			}
			if !bytes.Contains(resp.body, []byte(x.contains)) {
				t.Errorf("the answer lacks %s: %s", x.contains, resp.body)
			}
			if x.offContract {
				if ok, _ := v.ValidateHttpRequest(req.clone(t)); ok {
					t.Errorf("the validator accepts a request that breaks the contract")
				}
				if ok, errs := v.ValidateHttpResponse(req.clone(t), resp.clone()); !ok {
					t.Errorf("the answer breaks the contract:%s", describe(errs))
				}
			} else if ok, errs := v.ValidateHttpRequestResponse(req.clone(t), resp.clone()); !ok {
				t.Errorf("the exchange breaks the contract:%s", describe(errs))
			}
			if resp.StatusCode < 300 {
				if key, ok := documentedRoute(ops, x.method, req.path); ok {
					answered[key] = true
				} else {
					t.Errorf("%s %s matches no documented operation", x.method, req.path)
				}
			}
			if tag := resp.header.Get("ETag"); tag != "" {
				etags[x.target] = tag
			}
		})
	}
	if got := missing(ops, answered); len(got) > 0 {
		t.Errorf("documented operations no good request reached: %v", got)
	}
}

// recorded is a request or answer kept whole, so that the validator can
// read its body as often as it needs.
type recorded struct {
	method, url, path string
	header            http.Header
	body              []byte
}

func (r recorded) clone(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(r.method, r.url, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = r.header.Clone()
	return req
}

type answer struct {
	StatusCode int
	header     http.Header
	body       []byte
	req        *http.Request
}

func (a answer) clone() *http.Response {
	return &http.Response{StatusCode: a.StatusCode, Header: a.header.Clone(), Request: a.req,
		Body: io.NopCloser(bytes.NewReader(a.body))}
}

// send makes the exchange's request to base: the gateway, or the api's
// operator address.
func (x exchange) send(ctx context.Context, t *testing.T, base string, etags map[string]string) (recorded, answer) {
	t.Helper()
	h := x.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if x.revalidate != "" {
		tag, ok := etags[x.revalidate]
		if !ok {
			t.Fatalf("no earlier answer of %s had an ETag", x.revalidate)
		}
		h.Set("If-None-Match", tag)
	}
	rec := recorded{method: x.method, url: base + x.target, header: h, body: []byte(x.body)}
	req := rec.clone(t).WithContext(ctx)
	rec.path = req.URL.Path
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", x.method, x.target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", x.method, x.target, err)
	}
	return rec, answer{StatusCode: resp.StatusCode, header: resp.Header, body: body, req: rec.clone(t)}
}

// documentedRoute finds the documented operation a request reaches.
func documentedRoute(ops map[string]operation, method, path string) (string, bool) {
	for key, op := range ops {
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(op.path), "[^/]+") + "$"
		if op.method == method && regexp.MustCompile(re).MatchString(path) {
			return key, true
		}
	}
	return "", false
}

// get fetches url and returns the body of a 200.
func get(ctx context.Context, t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return b
}

// createOrgToken makes an organization runtime token for the demo
// organization with the stack's own admin command.
func createOrgToken(ctx context.Context, t *testing.T, st *localstack.Stack) string {
	t.Helper()
	return createToken(ctx, t, st, "--org", "demo-org", "--name", "contract test")
}

// createToken makes a token with token create's flags args.
func createToken(ctx context.Context, t *testing.T, st *localstack.Stack, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, filepath.Join(st.Dir, "bin", "api"),
		append([]string{"-content-db", st.DB, "token", "create", "--quiet"}, args...)...).Output()
	if err != nil {
		t.Fatalf("create a token %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// newestRevision reads the newest revision number of a record from its
// history, with the token in h.
func newestRevision(ctx context.Context, t *testing.T, url string, h http.Header) int64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Revisions []struct {
			Revision int64 `json:"revision"`
		} `json:"revisions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Revisions) == 0 {
		t.Fatalf("GET %s: %d, %v, %+v", url, resp.StatusCode, err, got)
	}
	return got.Revisions[0].Revision
}
