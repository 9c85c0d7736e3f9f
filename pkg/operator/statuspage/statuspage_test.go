package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/assistantcms/cms/internal/headless"
	"github.com/assistantcms/cms/pkg/buildinfo"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

func TestParseSources(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		names   []string
		wantErr string
	}{
		{"", nil, ""},
		{"ingest=http://127.0.0.1:1/metrics", []string{"ingest"}, ""},
		{" ingest=http://a/metrics , consumer=https://b:2/metrics,", []string{"ingest", "consumer"}, ""},
		{"http://a/metrics", nil, "want name=url"},
		{"=http://a/metrics", nil, "want name=url"},
		{"ingest=ftp://a/metrics", nil, "is not an http(s) URL"},
		{"ingest=/metrics", nil, "is not an http(s) URL"},
		{"a=http://x/m,a=http://y/m", nil, "named twice"},
	} {
		got, err := ParseSources(tc.spec, http.DefaultClient)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != strings.Join(tc.names, ",") {
			t.Errorf("%q: sources %v, want %v", tc.spec, names, tc.names)
		}
	}
}

// fakeIngest and fakeConsumer register the metrics the page reads, under
// the services' names, so that one test drives both kinds of source.
type fakeIngest struct {
	reg    *prometheus.Registry
	events *prometheus.CounterVec
}

func newFakeIngest() *fakeIngest {
	f := &fakeIngest{reg: prometheus.NewRegistry(), events: prometheus.NewCounterVec(
		prometheus.CounterOpts{Name: "cms_ingest_events_total"}, []string{"outcome"})}
	f.reg.MustRegister(f.events)
	return f
}

type fakeConsumer struct {
	reg         *prometheus.Registry
	rows        prometheus.Counter
	quarantined *prometheus.CounterVec
	lag         *prometheus.GaugeVec
	freshness   prometheus.Histogram
}

func newFakeConsumer() *fakeConsumer {
	f := &fakeConsumer{reg: prometheus.NewRegistry(),
		rows:        prometheus.NewCounter(prometheus.CounterOpts{Name: "cms_consumer_rows_inserted_total"}),
		quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cms_consumer_quarantine_rows_inserted_total"}, []string{"reason"}),
		lag:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cms_consumer_lag_messages"}, []string{"topic", "partition"}),
		freshness:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cms_consumer_freshness_seconds"}),
	}
	f.reg.MustRegister(f.rows, f.quarantined, f.lag, f.freshness)
	return f
}

func series(t *testing.T, snap Snapshot, chart, label string) []*float64 {
	t.Helper()
	for _, c := range snap.Charts {
		if c.Title != chart {
			continue
		}
		for _, s := range c.Series {
			if s.Label == label {
				if len(s.Values) != len(c.Times) {
					t.Fatalf("%s/%s: %d values for %d times", chart, label, len(s.Values), len(c.Times))
				}
				return s.Values
			}
		}
	}
	t.Fatalf("no series %s in chart %q", label, chart)
	return nil
}

func counter(t *testing.T, snap Snapshot, label string) float64 {
	t.Helper()
	for _, c := range snap.Counters {
		if c.Label == label {
			if c.Value == nil {
				t.Fatalf("counter %q is null", label)
			}
			return *c.Value
		}
	}
	t.Fatalf("no counter %q", label)
	return 0
}

func show(v []*float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSamplerDerivesRatesGaugesAndMeans(t *testing.T) {
	ing, con := newFakeIngest(), newFakeConsumer()
	// The consumer is scraped over HTTP in the text format, as in a
	// deployment; ingest is read in process.
	conSrv := httptest.NewServer(promhttp.HandlerFor(con.reg, promhttp.HandlerOpts{}))
	defer conSrv.Close()
	consumerDown := false
	remote := Remote("consumer", conSrv.URL, conSrv.Client())
	sources := []Source{Local("ingest", ing.reg), {Name: "consumer", Gather: func(ctx context.Context) (map[string]*dto.MetricFamily, error) {
		if consumerDown {
			return nil, errors.New("connection refused")
		}
		return remote.Gather(ctx)
	}}}
	s := NewSampler(sources, 2*time.Second, 10, nil)
	clock := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return clock }
	step := func() {
		t.Helper()
		s.Sample(context.Background())
		clock = clock.Add(2 * time.Second)
	}

	step() // nothing observed yet: every labelled series is absent
	ing.events.WithLabelValues("accepted").Add(100)
	ing.events.WithLabelValues("rejected").Add(4)
	con.rows.Add(60)
	con.quarantined.WithLabelValues("wrong_type").Add(3)
	con.quarantined.WithLabelValues("missing").Add(1)
	// Lag is summed over partitions and over both topics the consumer reads.
	con.lag.WithLabelValues("cms.events", "0").Set(25)
	con.lag.WithLabelValues("cms.events", "1").Set(10)
	con.lag.WithLabelValues("cms.events.quarantine", "0").Set(5)
	con.freshness.Observe(0.5)
	con.freshness.Observe(1.5)
	step()
	ing.events.WithLabelValues("accepted").Add(50)
	con.rows.Add(100)
	step() // no freshness observed in this interval: no mean
	consumerDown = true
	ing.events.WithLabelValues("accepted").Add(10)
	step() // the consumer did not answer: sums over fewer sources
	consumerDown = false
	step() // back: compared with a sample without it, still unknown
	con.rows.Add(20)
	step()

	snap := s.Snapshot()
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		chart, label string
		want         []*float64
	}{
		{"Events per second", "accepted", []*float64{f(50), f(25), nil, nil, f(0)}},
		{"Events per second", "rejected", []*float64{f(2), f(0), nil, nil, f(0)}},
		{"Rows written to ClickHouse per second", "rows", []*float64{f(30), f(50), nil, nil, f(10)}},
		{"Consumer lag", "lag", []*float64{f(40), f(40), nil, nil, f(40)}},
		{"Freshness: ingest to ClickHouse", "mean", []*float64{f(1), nil, nil, nil, nil}},
	} {
		got := series(t, snap, tc.chart, tc.label)
		if show(got) != show(tc.want) {
			t.Errorf("%s / %s: %s, want %s", tc.chart, tc.label, show(got), show(tc.want))
		}
	}
	for label, want := range map[string]float64{"Events accepted": 160, "Events rejected": 4, "Rows written to ClickHouse": 180, "Quarantined rows in ClickHouse": 4, "Consumer lag (messages)": 40} {
		if got := counter(t, snap, label); got != want {
			t.Errorf("counter %s = %v, want %v", label, got, want)
		}
	}
	if len(snap.Sources) != 2 || !snap.Sources[0].Up || !snap.Sources[1].Up || snap.Sources[1].Error != "" {
		t.Errorf("sources %+v, want both up", snap.Sources)
	}
	if times := snap.Charts[0].Times; len(times) != 5 || times[1]-times[0] != 2000 {
		t.Errorf("times %v: want 5, 2 s apart", times)
	}
}

func TestSamplerKeepsTheLatestSamplesAndReportsErrors(t *testing.T) {
	fail := Source{Name: "ingest", Gather: func(context.Context) (map[string]*dto.MetricFamily, error) {
		return nil, errors.New("scrape ingest: connection refused")
	}}
	s := NewSampler([]Source{fail}, time.Second, 3, nil)
	for range 5 {
		s.Sample(context.Background())
	}
	snap := s.Snapshot()
	if n := len(snap.Charts[0].Times); n != 2 {
		t.Errorf("%d points from 3 samples kept, want 2", n)
	}
	if st := snap.Sources[0]; st.Up || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("source state %+v, want down with its error", st)
	}
	for _, v := range series(t, snap, "Events per second", "accepted") {
		if v != nil {
			t.Errorf("a value %v with no source answering", *v)
		}
	}
	for _, c := range snap.Counters {
		if c.Value != nil {
			t.Errorf("counter %s = %v with its source down, want null", c.Label, *c.Value)
		}
	}
}

func TestRemoteSourceErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			_, _ = w.Write([]byte("this is not { the text format\n"))
			return
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for path, want := range map[string]string{"/down": "503", "/bad": "parse"} {
		_, err := Remote("ingest", srv.URL+path, srv.Client()).Gather(context.Background())
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "scrape ingest") {
			t.Errorf("%s: error %v, want one naming the source and %q", path, err, want)
		}
	}
}

func TestHandlers(t *testing.T) {
	s := NewSampler([]Source{Local("api", prometheus.NewRegistry())}, time.Second, 3, nil)
	s.Sample(context.Background())
	for _, tc := range []struct {
		h        http.Handler
		ctype    string
		contains string
	}{
		{PageHandler(), "text/html; charset=utf-8", `fetch("` + DataPath + `"`},
		// One sample gives no rate yet: times are an empty list, not null,
		// so the page can draw empty charts.
		{s.DataHandler(), "application/json", `"times":[],`},
	} {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != tc.ctype || !strings.Contains(rec.Body.String(), tc.contains) {
			t.Errorf("%d %q: body without %q", rec.Code, rec.Header().Get("Content-Type"), tc.contains)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
		}
	}
}

func TestAPITrafficLeavesOutScrapesAndPolling(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cms_api_requests_total"}, []string{"route", "method", "code"})
	reg.MustRegister(reqs)
	s := NewSampler([]Source{Local("api", reg)}, time.Second, 5, nil)
	clock := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return clock }
	s.Sample(context.Background())
	reqs.WithLabelValues("/cms/handler", "GET", "200").Add(10)
	reqs.WithLabelValues("/cms/search", "GET", "500").Add(2)
	reqs.WithLabelValues("/metrics", "GET", "200").Add(100)
	reqs.WithLabelValues(DataPath, "GET", "200").Add(50)
	clock = clock.Add(time.Second)
	s.Sample(context.Background())
	snap := s.Snapshot()
	if got := counter(t, snap, "Content API requests"); got != 12 {
		t.Errorf("content API requests %v, want 12", got)
	}
	for label, want := range map[string]string{"all": "[12]", "5xx": "[2]"} {
		if got := show(series(t, snap, "Content API requests per second", label)); got != want {
			t.Errorf("%s: %s, want %s", label, got, want)
		}
	}
}

// rejectedBy registers ingest's quarantine counter, labelled as ingest
// labels it.
func rejectedBy(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cms_ingest_events_rejected_total"}, []string{"reason", "field"})
	reg.MustRegister(c)
	return c
}

func TestQuarantinedByReasonSumsFieldsAndSources(t *testing.T) {
	// Two ingest replicas; the breakdown adds them up.
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, b := rejectedBy(regA), rejectedBy(regB)
	bDown := false
	srcB := Local("ingest-b", regB)
	s := NewSampler([]Source{Local("ingest-a", regA), {Name: "ingest-b", Gather: func(ctx context.Context) (map[string]*dto.MetricFamily, error) {
		if bDown {
			return nil, errors.New("connection refused")
		}
		return srcB.Gather(ctx)
	}}}, time.Second, 3, nil)
	for _, step := range []struct {
		name   string
		change func()
		want   string // the rows as JSON
	}{
		{"nothing exported yet", func() {}, `[]`},
		{"zero series are rows too", func() {
			a.WithLabelValues("too_large", "")
			b.WithLabelValues("app_mismatch", "")
		}, `[{"key":"app_mismatch","value":0},{"key":"too_large","value":0}]`},
		{"summed over fields and sources, largest first", func() {
			a.WithLabelValues("wrong_type", "sessionId").Add(2)
			a.WithLabelValues("wrong_type", "payload.response.displays[].title").Add(1)
			b.WithLabelValues("wrong_type", "sessionId").Add(1)
			a.WithLabelValues("missing", "name").Add(3)
			b.WithLabelValues("missing", "type").Add(1)
			b.WithLabelValues("not_object", "").Add(1)
		}, `[{"key":"missing","value":4},{"key":"wrong_type","value":4},{"key":"not_object","value":1},{"key":"app_mismatch","value":0},{"key":"too_large","value":0}]`},
		{"a source down: unknown", func() { bDown = true }, `null`},
		{"back", func() { bDown = false }, `[{"key":"missing","value":4},{"key":"wrong_type","value":4},{"key":"not_object","value":1},{"key":"app_mismatch","value":0},{"key":"too_large","value":0}]`},
	} {
		step.change()
		s.Sample(context.Background())
		snap := s.Snapshot()
		if len(snap.Breakdowns) != 1 {
			t.Fatalf("%s: %d breakdowns, want 1", step.name, len(snap.Breakdowns))
		}
		bd := snap.Breakdowns[0]
		if bd.Title != "Quarantined by reason" || bd.By != "reason" || bd.Unit != "events" {
			t.Errorf("%s: breakdown %q by %q in %q", step.name, bd.Title, bd.By, bd.Unit)
		}
		if got, _ := json.Marshal(bd.Rows); string(got) != step.want {
			t.Errorf("%s: rows %s, want %s", step.name, got, step.want)
		}
	}
}

// TestPageShowsQuarantinedByReason renders the page in headless Chromium
// and reads what its script made of the data.
func TestPageShowsQuarantinedByReason(t *testing.T) {
	down := Source{Name: "ingest", Gather: func(context.Context) (map[string]*dto.MetricFamily, error) {
		return nil, errors.New("connection refused")
	}}
	for _, tc := range []struct {
		name  string
		setup func(ing *prometheus.CounterVec, con *fakeConsumer)
		down  bool
		// want is the breakdown as text: a line per table row, cells
		// separated by "|".
		want, rows string
	}{
		{"ingest down", nil, true, "Quarantined by reason\n–", "–"},
		{"nothing quarantined", func(ing *prometheus.CounterVec, con *fakeConsumer) {
			ing.WithLabelValues("wrong_type", "")
			con.quarantined.WithLabelValues("wrong_type")
		}, false, "Quarantined by reason\nNone", "0"},
		{"by reason, zeros left out", func(ing *prometheus.CounterVec, con *fakeConsumer) {
			ing.WithLabelValues("too_large", "")
			ing.WithLabelValues("wrong_type", "sessionId").Add(2)
			ing.WithLabelValues("wrong_type", "userId").Add(1)
			ing.WithLabelValues("missing", "name").Add(1)
			con.quarantined.WithLabelValues("wrong_type").Add(3)
		}, false, "Quarantined by reason\nreason|events|share\nwrong_type|3|75%\nmissing|1|25%", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			ing, con := rejectedBy(reg), newFakeConsumer()
			if tc.setup != nil {
				tc.setup(ing, con)
			}
			src := Local("ingest", reg)
			if tc.down {
				src = down
			}
			s := NewSampler([]Source{src, Local("consumer", con.reg)}, time.Second, 3, nil)
			s.Sample(context.Background())
			mux := http.NewServeMux()
			mux.Handle(Path, PageHandler())
			mux.Handle(DataPath, s.DataHandler())
			srv := httptest.NewServer(mux)
			defer srv.Close()

			dom := headless.DumpDOM(t.Context(), t, srv.URL+Path, 3*time.Second)
			m := breakdownRE.FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("no breakdown on the page:\n%s", dom)
			}
			if got := cellText(m[1]); got != tc.want {
				t.Errorf("breakdown shows\n%s\nwant\n%s", got, tc.want)
			}
			if want := `<div class="counter">Quarantined rows in ClickHouse<b>` + tc.rows + `</b></div>`; !strings.Contains(dom, want) {
				t.Errorf("no %s on the page:\n%s", want, dom)
			}
		})
	}
}

var (
	breakdownRE = regexp.MustCompile(`<div class="breakdown">(.*?)</div>`)
	rowEndRE    = regexp.MustCompile(`</(?:h2|tr|p)>`)
	cellEndRE   = regexp.MustCompile(`</t[dh]>`)
	tagRE       = regexp.MustCompile(`<[^>]*>`)
)

// cellText turns a breakdown's HTML into a line per heading, row or
// paragraph, with "|" between cells.
func cellText(h string) string {
	h = rowEndRE.ReplaceAllString(h, "\n")
	h = cellEndRE.ReplaceAllString(h, "|")
	h = tagRE.ReplaceAllString(h, "")
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(h), "\n") {
		lines = append(lines, strings.TrimSuffix(l, "|"))
	}
	return strings.Join(lines, "\n")
}

// buildSource is a service exporting cms_build_info as the services do,
// scraped over HTTP in the text format.
func buildSource(t *testing.T, name, version, revision, goVersion string) Source {
	t.Helper()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cms_build_info",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion}})
	g.Set(1)
	reg.MustRegister(g)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return Remote(name, srv.URL, srv.Client())
}

func TestSourcesShowTheirBuild(t *testing.T) {
	down := Source{Name: "ingest-b", Gather: func(context.Context) (map[string]*dto.MetricFamily, error) {
		return nil, errors.New("connection refused")
	}}
	for _, tc := range []struct {
		name string
		src  Source
		want Build
	}{
		// The registry every service serves /metrics from.
		{"this process", Local("api", httpserve.NewRegistry()),
			Build{Version: buildinfo.Version(), Revision: buildinfo.Revision(), GoVersion: buildinfo.GoVersion()}},
		{"scraped", buildSource(t, "ingest", "0.19.0", "abc1234", "go1.26.8"), Build{"0.19.0", "abc1234", "go1.26.8"}},
		{"a release without the metric", Local("consumer", newFakeConsumer().reg), Build{}},
		{"down", down, Build{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSampler([]Source{tc.src}, time.Second, 3, nil)
			s.Sample(context.Background())
			if got := s.Snapshot().Sources[0].Build; got != tc.want {
				t.Errorf("build %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSourceBuildFollowsRestarts(t *testing.T) {
	// A source upgraded between samples shows its new version; one gone
	// down shows none rather than the last it had.
	var current Source
	s := NewSampler([]Source{{Name: "ingest", Gather: func(ctx context.Context) (map[string]*dto.MetricFamily, error) {
		return current.Gather(ctx)
	}}}, time.Second, 3, nil)
	for _, step := range []struct {
		name string
		src  Source
		want string
	}{
		{"first", buildSource(t, "ingest", "0.18.0", "aaa1111", "go1.26.8"), "0.18.0"},
		{"upgraded", buildSource(t, "ingest", "0.19.0", "bbb2222", "go1.26.8"), "0.19.0"},
		{"down", Source{Gather: func(context.Context) (map[string]*dto.MetricFamily, error) { return nil, errors.New("refused") }}, ""},
	} {
		current = step.src
		s.Sample(context.Background())
		if got := s.Snapshot().Sources[0].Version; got != step.want {
			t.Errorf("%s: version %q, want %q", step.name, got, step.want)
		}
	}
}

// TestPageShowsVersions renders the page in headless Chromium and reads
// each source's line.
func TestPageShowsVersions(t *testing.T) {
	down := Source{Name: "ingest", Gather: func(context.Context) (map[string]*dto.MetricFamily, error) {
		return nil, errors.New("connection refused")
	}}
	sources := []Source{
		buildSource(t, "consumer", "0.19.0", "abc1234", "go1.26.8"),
		Local("api", newFakeConsumer().reg),
		down,
	}
	s := NewSampler(sources, time.Second, 3, nil)
	s.Sample(context.Background())
	mux := http.NewServeMux()
	mux.Handle(Path, PageHandler())
	mux.Handle(DataPath, s.DataHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dom := headless.DumpDOM(t.Context(), t, srv.URL+Path, 3*time.Second)
	for _, tc := range []struct {
		name, want string
	}{
		{"version, with revision and Go on hover", `<span class="up">● consumer<small class="version" title="revision abc1234, go1.26.8">0.19.0</small></span>`},
		{"no metric: the name alone", `<span class="up">● api</span>`},
		{"down: no version", `<span class="down" title="connection refused">○ ingest</span>`},
	} {
		if !strings.Contains(dom, tc.want) {
			t.Errorf("%s: no %s on the page:\n%s", tc.name, tc.want, dom)
		}
	}
}
