package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/debpkg"
	"github.com/assistantcms/cms/internal/demotraffic"
	"github.com/assistantcms/cms/internal/headless"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/operator/analyticspage"
	"github.com/assistantcms/cms/pkg/operator/statuspage"
)

// query is one PromQL expression of a dashboard panel or an alert.
type query struct {
	where, expr string
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// variable is a dashboard's template variable.
type variable struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Query      any        `json:"query"`
	Datasource datasource `json:"datasource"`
	IncludeAll bool       `json:"includeAll"`
	AllValue   string     `json:"allValue"`
}

type panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Targets    []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// dashboardDatasource is the uid every panel and query names: the
// dashboard's datasource variable, so that one dashboard serves any
// Prometheus.
const dashboardDatasource = "${datasource}"

// readDashboards decodes every dashboard in grafana/, by file.
func readDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob("grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/: %v", err)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		var d dashboard
		if err := json.Unmarshal([]byte(read(t, f)), &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

// dashboardQueries reads every dashboard in grafana/ and checks what can
// be checked without Grafana: unique identifiers, the datasource variable,
// at least one query per panel.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	dashboards := readDashboards(t)
	var out []query
	uids := map[string]string{}
	for _, f := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[f]
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q, title %q: both are needed for provisioning", f, d.UID, d.Title)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %q", f, other, d.UID)
		}
		uids[d.UID] = f
		ids := map[int]bool{}
		for _, p := range d.Panels {
			where := fmt.Sprintf("%s panel %d %q", f, p.ID, p.Title)
			if ids[p.ID] {
				t.Errorf("%s: panel id used twice", where)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.Datasource.UID != dashboardDatasource || len(p.Targets) == 0 {
				t.Errorf("%s: datasource %q with %d queries; want %s and at least one", where, p.Datasource.UID, len(p.Targets), dashboardDatasource)
			}
			for _, tg := range p.Targets {
				if tg.Datasource.UID != dashboardDatasource || strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s query %s: datasource %q, expr %q", where, tg.RefID, tg.Datasource.UID, tg.Expr)
				}
				out = append(out, query{where + " query " + tg.RefID, tg.Expr})
			}
		}
	}
	return out
}

// alertQueries reads the expressions of prometheus/alerts.yml.
func alertQueries(t *testing.T) []query {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "prometheus/alerts.yml")), &rules); err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, query{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}

// metricRE finds the metric names a query reads; the services' metrics,
// and the Go and process metrics every one of them exports, have these
// prefixes, and no PromQL keyword or label does.
var metricRE = regexp.MustCompile(`\b(?:cms|go|process)_[a-z0-9_]+\b`)

// grafanaVars stand for what Grafana substitutes before a query runs; the
// namespace and instance variables as their All value.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$namespace", ".*", "$instance", ".*")

// scopeMatchers are the label matchers every metric a panel reads must
// carry, so that the namespace and instance variables narrow every panel
// (namespace is empty on compose, which the All value .* matches).
var scopeMatchers = []string{`namespace=~"$namespace"`, `instance=~"$instance"`}

// selectorRE is a metric name and its label matchers, if any.
var selectorRE = regexp.MustCompile(metricRE.String() + `(\{[^}]*\})?`)

// TestDashboardQueries holds every dashboard to datasource, namespace and
// instance variables, and every panel to a query Prometheus accepts
// (promtool checks each one as a recording rule) that names a metric and
// narrows each one it reads to the selected namespace and instance.
func TestDashboardQueries(t *testing.T) {
	for f, d := range readDashboards(t) {
		vars := map[string]variable{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v
		}
		if v := vars["datasource"]; v.Type != "datasource" || v.Query != "prometheus" {
			t.Errorf("%s: variable datasource %+v; want one of type datasource listing prometheus sources", f, v)
		}
		for _, name := range []string{"namespace", "instance"} {
			v := vars[name]
			q, _ := v.Query.(map[string]any)
			if v.Type != "query" || v.Datasource.UID != dashboardDatasource || !v.IncludeAll || v.AllValue != ".*" ||
				!strings.Contains(fmt.Sprint(q["query"]), "label_values(") || !strings.HasSuffix(fmt.Sprint(q["query"]), ", "+name+")") {
				t.Errorf("%s: variable %s %+v; want label_values of %s from %s, with All as .*, which also matches the label's absence", f, name, v, name, dashboardDatasource)
			}
		}
	}
	queries := dashboardQueries(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	for i, q := range queries {
		if len(metricRE.FindAllString(q.expr, -1)) == 0 {
			t.Errorf("%s: %q names no metric", q.where, q.expr)
		}
		for _, m := range selectorRE.FindAllStringSubmatch(q.expr, -1) {
			for _, want := range scopeMatchers {
				if !strings.Contains(m[1], want) {
					t.Errorf("%s: %s lacks %s", q.where, m[0], want)
				}
			}
		}
		expr, _ := json.Marshal(grafanaVars.Replace(q.expr)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
	}
	promtool, err := debpkg.Find("promtool")
	if err != nil {
		t.Fatalf("%v: go run ./dev/test installs it (Debian's prometheus package)", err)
	}
	file := filepath.Join(t.TempDir(), "dashboards.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool rejects a dashboard query: %v\n%s", err, out)
	}
}

// TestLiveStack runs every service, sends traffic through the one address
// and checks what watches them: every metric the dashboards and alerts
// read is exported, and the status page draws its charts with data.
func TestLiveStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logs := &childproc.Output{}
	st, err := localstack.Start(ctx, localstack.Options{
		Dir:     t.TempDir(),
		Content: "demo/content.yaml",
		Env: map[string][]string{
			"api":      {"STATUS_INTERVAL=300ms"},
			"consumer": {"FLUSH_INTERVAL=200ms"},
		},
		Log: func(string) io.Writer { return logs },
	})
	if err != nil {
		t.Fatalf("start the local stack: %v\n%s", err, logs.String())
	}
	t.Cleanup(st.Stop)
	one := "http://" + st.Gateway
	// The status and analytics pages answer on the api's operator
	// address; the one address clients call never shows them.
	pages := "http://" + st.APIOperator

	sent := sendTraffic(ctx, t, one, st.Token)
	accepted := sent.Accepted
	readContent(t, one, st.Token)
	// Steady traffic until the screenshot, so that every chart has data
	// across most of its window however long the waits below take.
	stopBusy := keepBusy(t, one, st.Token)
	defer stopBusy()
	// Rows reach ClickHouse within a few flushes.
	waitFor(t, 60*time.Second, "every accepted event written to ClickHouse", func() bool {
		return scrapeValue(t, "http://"+st.ConsumerOperator+"/metrics", "cms_consumer_rows_inserted_total") >= float64(accepted)
	})

	t.Run("search ranks by meaning with the built-in encoder by default", func(t *testing.T) {
		u := one + "/cms/search?question=" + url.QueryEscape("when are you open")
		waitFor(t, 60*time.Second, "a search answer ranked by meaning (X-Retrieval: hybrid)", func() bool {
			r := do(t, http.MethodGet, u, st.Token, "")
			if r.code != http.StatusOK || r.header.Get("X-Retrieval") == "" {
				t.Fatalf("GET %s: %d, X-Retrieval %q: want 200 ranked by meaning", u, r.code, r.header.Get("X-Retrieval"))
			}
			return r.header.Get("X-Retrieval") == "hybrid"
		})
	})

	t.Run("dashboards and alerts read exported metrics", func(t *testing.T) {
		exported := map[string]bool{}
		for _, addr := range []string{st.IngestOperator, st.ConsumerOperator, st.APIOperator, st.GatewayOperator} {
			for name := range scrapeNames(t, "http://"+addr+"/metrics") {
				exported[name] = true
			}
		}
		for _, q := range append(dashboardQueries(t), alertQueries(t)...) {
			for _, name := range metricRE.FindAllString(q.expr, -1) {
				if !exported[name] {
					t.Errorf("%s reads %s, which no service exports", q.where, name)
				}
			}
		}
	})

	t.Run("status page charts the traffic", func(t *testing.T) {
		// The sampler has seen the traffic once the rates over it are in.
		var snap statuspage.Snapshot
		waitFor(t, 30*time.Second, "status data with events, rows and requests", func() bool {
			snap = statusData(t, pages)
			return peak(snap, "Events per second", "accepted") > 0 &&
				peak(snap, "Rows written to ClickHouse per second", "rows") > 0 &&
				peak(snap, "Content API requests per second", "all") > 0
		})
		for _, s := range snap.Sources {
			if !s.Up {
				t.Errorf("source %s is down on the status page: %s", s.Name, s.Error)
			}
		}
		shot := screenshot(ctx, t, pages+statuspage.Path)
		stopBusy()
		// Each chart shades the area under its series in the series'
		// colour at 20%: a series with data covers many pixels, one at
		// zero none (its line and legend are drawn at full strength).
		for _, tc := range []struct {
			series string
			color  [3]uint8
		}{
			{"events accepted", [3]uint8{0x1a, 0x98, 0x50}},
			{"rows written", [3]uint8{0x45, 0x75, 0xb4}},
			{"api requests", [3]uint8{0x1b, 0x9e, 0x9e}},
		} {
			if n := shaded(shot, tc.color); n < 500 {
				t.Errorf("%s: %d pixels shaded in its colour, want at least 500: the chart has no data", tc.series, n)
			}
		}
		// A colour no series uses stays absent: the count means something.
		if n := shaded(shot, [3]uint8{0x00, 0x00, 0xff}); n > 0 {
			t.Errorf("%d pixels shaded in a colour no series has", n)
		}
	})

	t.Run("every documented query answers what was sent", func(t *testing.T) {
		stopBusy() // the counts below are of settled traffic
		checkDocumentedQueries(ctx, t, st, sent.Turns)
	})
	t.Run("authors read their app's analytics and gap inbox", func(t *testing.T) { checkAuthorsAnalytics(ctx, t, st, pages) })

	t.Run("status page shows quarantined events by reason", func(t *testing.T) {
		// The one refused event, counted by ingest under its reason and
		// written by the consumer to the quarantine table.
		want := map[string]float64{rejectedReason: 1}
		var snap statuspage.Snapshot
		waitFor(t, 60*time.Second, "status data with the quarantined event and its row", func() bool {
			snap = statusData(t, pages)
			rows := counterValue(snap, "Quarantined rows in ClickHouse")
			got, ok := quarantinedByReason(snap)
			return ok && maps.Equal(got, want) && rows != nil && *rows == 1
		})
		dom := headless.DumpDOM(ctx, t, pages+statuspage.Path, 5*time.Second)
		table := regexp.MustCompile(`<div class="breakdown"><h2>Quarantined by reason</h2>(.*?)</div>`).FindStringSubmatch(dom)
		if table == nil {
			t.Fatalf("no table of events quarantined by reason on the page:\n%s", dom)
		}
		shown := map[string]string{}
		for _, m := range regexp.MustCompile(`<tr><td>([^<]*)</td><td class="n">([^<]*)</td>`).FindAllStringSubmatch(table[1], -1) {
			shown[m[1]] = m[2]
		}
		if !maps.Equal(shown, map[string]string{rejectedReason: "1"}) {
			t.Errorf("the page lists quarantined events by reason as %v, want %s: 1 alone:\n%s", shown, rejectedReason, table[1])
		}
		if c := `<div class="counter">Quarantined rows in ClickHouse<b>1</b></div>`; !strings.Contains(dom, c) {
			t.Errorf("the page has no %s:\n%s", c, dom)
		}
	})
	t.Run("analytics page draws the rollups", func(t *testing.T) { checkAnalyticsPage(ctx, t, st, pages) })
	t.Run("operator surfaces answer on operator addresses only", func(t *testing.T) { checkOperatorSurfaces(t, st) })
}

// checkOperatorSurfaces probes the one address clients call for every
// operator surface: each answers 404 there and 200 on its service's
// operator address, while clients' content and health still answer.
func checkOperatorSurfaces(t *testing.T, st *localstack.Stack) {
	one := "http://" + st.Gateway
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/cms/app", st.Token, http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/metrics", "", http.StatusNotFound},
		{statuspage.Path, "", http.StatusNotFound},
		{statuspage.DataPath, "", http.StatusNotFound},
		{analyticspage.Path, "", http.StatusNotFound},
		{analyticspage.DataPath, "", http.StatusNotFound},
		{"/debug/pprof/", "", http.StatusNotFound},
	} {
		if r := do(t, http.MethodGet, one+tc.path, tc.token, ""); r.code != tc.want {
			t.Errorf("GET %s on the client address: %d, want %d: %.200s", tc.path, r.code, tc.want, r.body)
		}
	}
	for _, tc := range []struct{ addr, path string }{
		{st.IngestOperator, "/metrics"}, {st.ConsumerOperator, "/metrics"}, {st.APIOperator, "/metrics"}, {st.GatewayOperator, "/metrics"},
		{st.IngestOperator, "/debug/pprof/"}, {st.GatewayOperator, "/debug/pprof/"},
		{st.APIOperator, statuspage.Path}, {st.APIOperator, statuspage.DataPath},
		{st.APIOperator, analyticspage.Path + "?app=demo-app"}, {st.APIOperator, analyticspage.DataPath + "?app=demo-app"},
		{st.GatewayOperator, "/healthz"}, {st.APIOperator, "/readyz"},
	} {
		if r := do(t, http.MethodGet, "http://"+tc.addr+tc.path, "", ""); r.code != http.StatusOK {
			t.Errorf("GET %s on the operator address %s: %d, want 200: %.200s", tc.path, tc.addr, r.code, r.body)
		}
	}
	// The services' main addresses refuse operator paths too.
	for _, addr := range []string{st.Ingest, st.Consumer, st.API} {
		if r := do(t, http.MethodGet, "http://"+addr+"/metrics", "", ""); r.code != http.StatusNotFound {
			t.Errorf("GET /metrics on the main address %s: %d, want 404", addr, r.code)
		}
	}
}

// rejectedReason is the reason of the one event sendTraffic has refused.
const rejectedReason = "wrong_type"

// sendTraffic sends demo conversations and one invalid event through the
// one address and returns what ingest accepted of the conversations.
func sendTraffic(ctx context.Context, t *testing.T, base, token string) demotraffic.Stats {
	t.Helper()
	file, err := bundle.ReadFile("demo/content.yaml")
	if err != nil {
		t.Fatal(err)
	}
	turns, err := demotraffic.TurnsFrom(&file.Bundle, "demo-app")
	if err != nil {
		t.Fatal(err)
	}
	stats, err := demotraffic.Run(ctx, demotraffic.Config{
		URL: base + "/cms/app/events", Token: token, Turns: turns, Channels: []string{"web-chat"},
		SessionsPerSecond: 20, TurnsPerSession: 3, TurnGap: 50 * time.Millisecond, Duration: 2 * time.Second, Seed: 1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Accepted == 0 || stats.Quarantined != 0 || len(stats.Failures) > 0 {
		t.Fatalf("demo traffic: %d accepted, %d quarantined, failures %v", stats.Accepted, stats.Quarantined, stats.Failures)
	}
	// One rejected event, the only one, gives the rejection series a
	// reason: a number where sessionId must be a string.
	body := `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":7,"userId":"u1","selectedHandler":"LaunchRequest"}]}`
	resp := do(t, http.MethodPut, base+"/cms/app/events", token, body)
	if resp.code != http.StatusOK || !strings.Contains(resp.body, `"rejected":1`) || !strings.Contains(resp.body, `"reason":"`+rejectedReason+`"`) {
		t.Fatalf("invalid event: %d %s, want it rejected for %s", resp.code, resp.body, rejectedReason)
	}
	return stats
}

// keepBusy sends an event and a content read every 100 ms until the
// returned stop is called (once or more), then reports what failed.
func keepBusy(t *testing.T, base, token string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []string, 1)
	go func() {
		var failures []string
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		event := `{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web-chat","platform":"web","sessionId":"busy","userId":"u1","selectedHandler":"LaunchRequest"}]}`
		for {
			select {
			case <-ctx.Done():
				done <- failures
				return
			case <-tick.C:
			}
			for _, r := range []struct{ method, path, body string }{
				{http.MethodPut, "/cms/app/events", event},
				{http.MethodGet, "/cms/handler", ""},
			} {
				code, err := send(ctx, r.method, base+r.path, token, r.body)
				if ctx.Err() == nil && (err != nil || code != http.StatusOK) && len(failures) < 10 {
					failures = append(failures, fmt.Sprintf("%s %s: %d %v", r.method, r.path, code, err))
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if failures := <-done; len(failures) > 0 {
				t.Errorf("steady traffic failed: %v", failures)
			}
		})
	}
}

// readContent calls the content API's read routes through the one
// address, so that each has its series.
func readContent(t *testing.T, base, token string) {
	t.Helper()
	q := url.QueryEscape
	for _, path := range []string{
		"/cms/app", "/cms/handler", "/cms/entity", "/cms/handler/OpeningHours",
		"/cms/search?question=" + q("opening hours"), "/cms/faq/query?question=" + q("opening hours"),
		"/cms/rag?question=" + q("when are you open"), "/cms/suggestions?key=demo-web-chat&queryText=open",
	} {
		if r := do(t, http.MethodGet, base+path, token, ""); r.code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, r.code, r.body)
		}
	}
	if r := do(t, http.MethodPost, base+"/cms/graphql", token, `{"query":"{ __typename }"}`); r.code != http.StatusOK {
		t.Errorf("POST /cms/graphql: %d %s", r.code, r.body)
	}
}

type response struct {
	code   int
	body   string
	header http.Header
}

func do(t *testing.T, method, u, token, body string, headers ...string) response {
	t.Helper()
	resp, err := request(context.Background(), method, u, token, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send is a request whose body does not matter, for goroutines.
func send(ctx context.Context, method, u, token, body string) (int, error) {
	resp, err := request(ctx, method, u, token, body)
	return resp.code, err
}

// request sends a request; headers are name/value pairs added to it.
func request(ctx context.Context, method, u, token, body string, headers ...string) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read the body: %w", method, u, err)
	}
	return response{resp.StatusCode, string(b), resp.Header}, nil
}

// scrapeNames returns the names of every sample a /metrics page holds
// (histograms as their _bucket, _sum and _count).
func scrapeNames(t *testing.T, u string) map[string]float64 {
	t.Helper()
	r := do(t, http.MethodGet, u, "", "")
	if r.code != http.StatusOK {
		t.Fatalf("GET %s: %d", u, r.code)
	}
	names := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		var v float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		names[line[:end]] += v
	}
	return names
}

// scrapeValue is a metric's value summed over its series.
func scrapeValue(t *testing.T, u, name string) float64 { return scrapeNames(t, u)[name] }

func statusData(t *testing.T, base string) statuspage.Snapshot {
	t.Helper()
	r := do(t, http.MethodGet, base+statuspage.DataPath, "", "")
	var snap statuspage.Snapshot
	if err := json.Unmarshal([]byte(r.body), &snap); r.code != http.StatusOK || err != nil {
		t.Fatalf("status data: %d %v", r.code, err)
	}
	return snap
}

// peak is a series' largest value, 0 when it has none.
func peak(snap statuspage.Snapshot, chart, series string) float64 {
	var hi float64
	for _, c := range snap.Charts {
		for _, s := range c.Series {
			if c.Title == chart && s.Label == series {
				for _, v := range s.Values {
					if v != nil && *v > hi {
						hi = *v
					}
				}
			}
		}
	}
	return hi
}

// counterValue is a status page total, nil when unknown or absent.
func counterValue(snap statuspage.Snapshot, label string) *float64 {
	for _, c := range snap.Counters {
		if c.Label == label {
			return c.Value
		}
	}
	return nil
}

// quarantinedByReason is the status page's breakdown of quarantined
// events without its zero rows; ok is false while it is unknown.
func quarantinedByReason(snap statuspage.Snapshot) (byReason map[string]float64, ok bool) {
	for _, b := range snap.Breakdowns {
		if b.Title != "Quarantined by reason" || b.Rows == nil {
			continue
		}
		byReason = map[string]float64{}
		for _, r := range b.Rows {
			if r.Value != 0 {
				byReason[r.Key] = r.Value
			}
		}
		return byReason, true
	}
	return nil, false
}

// screenshot renders u in headless Chromium, giving its scripts time to
// fetch and draw.
func screenshot(ctx context.Context, t *testing.T, u string) image.Image {
	t.Helper()
	out := filepath.Join(t.TempDir(), "status.png")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := headless.Command(ctx, t, "--hide-scrollbars", "--window-size=1280,1100", "--virtual-time-budget=5000", "--screenshot="+out, u)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}
	if keep := os.Getenv("STATUS_SCREENSHOT"); keep != "" {
		// For a person looking at the page: STATUS_SCREENSHOT=path.png.
		if b, err := os.ReadFile(out); err != nil || os.WriteFile(keep, b, 0o644) != nil {
			t.Logf("could not keep the screenshot in %s", keep)
		}
	}
	return img
}

// shaded counts the pixels of the colour c laid at 20% over white, as the
// page shades the area under a series.
func shaded(img image.Image, c [3]uint8) int {
	want := [3]int{}
	for i, v := range c {
		want[i] = 255 - (255-int(v))*20/100
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			if slices.IndexFunc([]int{0, 1, 2}, func(i int) bool { return abs(got[i]-want[i]) > 3 }) < 0 {
				n++
			}
		}
	}
	return n
}

func abs(v int) int { return max(v, -v) }

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
