package statuspage

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// measure is one number summed over every source's metrics.
type measure struct {
	metric string
	field  field
	// match picks the series counted; nil counts all.
	match func(m *dto.Metric) bool
}

type field int

const (
	value field = iota // a counter's or gauge's value
	histSum
	histCount
)

// kind says how a chart series is derived from successive samples.
type kind int

const (
	rate  kind = iota // per-second increase of a counter
	gauge             // the value itself
	mean              // a histogram's mean over the interval
)

type seriesDef struct {
	label, color string
	kind         kind
	m            measure // for mean: the histogram; its sum and count are read
}

type chartDef struct {
	title, unit string
	series      []seriesDef
}

type counterDef struct {
	label string
	m     measure
}

// breakdownDef splits a total by the values of one label, summing over
// the other labels and the sources.
type breakdownDef struct {
	title, by, unit string
	m               measure
}

func labelIs(name, want string) func(*dto.Metric) bool {
	return func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue() == want
			}
		}
		return false
	}
}

func labelHasPrefix(name, prefix string) func(*dto.Metric) bool {
	return func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return strings.HasPrefix(l.GetValue(), prefix)
			}
		}
		return false
	}
}

// contentRoute leaves out scrapes of /metrics and the status page's own
// polling, which would otherwise show as traffic.
func contentRoute(m *dto.Metric) bool { return labelHasPrefix("route", "/cms/")(m) }

func both(a, b func(*dto.Metric) bool) func(*dto.Metric) bool {
	return func(m *dto.Metric) bool { return a(m) && b(m) }
}

// charts are what the page draws: events in, rows out, how far behind the
// consumer is, how fresh the data is, and the content API's traffic. Each
// series has its own colour, so that a picture of the page shows which
// ones have data.
func charts() []chartDef {
	return []chartDef{
		{"Events per second", "/s", []seriesDef{
			{"accepted", "#1a9850", rate, measure{"cms_ingest_events_total", value, labelIs("outcome", "accepted")}},
			{"rejected", "#d73027", rate, measure{"cms_ingest_events_total", value, labelIs("outcome", "rejected")}},
		}},
		{"Rows written to ClickHouse per second", "/s", []seriesDef{
			{"rows", "#4575b4", rate, measure{"cms_consumer_rows_inserted_total", value, nil}},
		}},
		{"Consumer lag", "messages", []seriesDef{
			{"lag", "#fc8d59", gauge, measure{"cms_consumer_lag_messages", value, nil}},
		}},
		{"Freshness: ingest to ClickHouse", "s", []seriesDef{
			{"mean", "#762a83", mean, measure{"cms_consumer_freshness_seconds", histSum, nil}},
		}},
		{"Content API requests per second", "/s", []seriesDef{
			{"all", "#1b9e9e", rate, measure{"cms_api_requests_total", value, contentRoute}},
			{"5xx", "#e7298a", rate, measure{"cms_api_requests_total", value, both(contentRoute, labelHasPrefix("code", "5"))}},
		}},
	}
}

func counters() []counterDef {
	return []counterDef{
		{"Events accepted", measure{"cms_ingest_events_total", value, labelIs("outcome", "accepted")}},
		{"Events rejected", measure{"cms_ingest_events_total", value, labelIs("outcome", "rejected")}},
		{"Rows written to ClickHouse", measure{"cms_consumer_rows_inserted_total", value, nil}},
		{"Quarantined rows in ClickHouse", measure{"cms_consumer_quarantine_rows_inserted_total", value, nil}},
		{"Consumer lag (messages)", measure{"cms_consumer_lag_messages", value, nil}},
		{"Dead letters", measure{"cms_consumer_dead_letters_total", value, nil}},
		{"Content API requests", measure{"cms_api_requests_total", value, contentRoute}},
	}
}

// breakdowns say why events were refused: ingest counts each quarantined
// event by the reason of its first error (and the field, summed over
// here, since a table of every field would not stay small).
func breakdowns() []breakdownDef {
	return []breakdownDef{
		{"Quarantined by reason", "reason", "events", measure{"cms_ingest_events_rejected_total", value, nil}},
	}
}

// read sums m over the families of one source.
func read(fams map[string]*dto.MetricFamily, m measure) float64 {
	var total float64
	for _, x := range matching(fams, m) {
		total += valueOf(x, m.field)
	}
	return total
}

// readBy sums m over the families of one source into out, by the value of
// the label by ("" for series without it).
func readBy(fams map[string]*dto.MetricFamily, m measure, by string, out map[string]float64) {
	for _, x := range matching(fams, m) {
		key := ""
		for _, l := range x.GetLabel() {
			if l.GetName() == by {
				key = l.GetValue()
			}
		}
		out[key] += valueOf(x, m.field)
	}
}

// matching is m's series in one source; labelled series appear only once
// observed, so a metric not there yet has none and sums to zero.
func matching(fams map[string]*dto.MetricFamily, m measure) []*dto.Metric {
	f := fams[m.metric]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, x := range f.GetMetric() {
		if m.match == nil || m.match(x) {
			out = append(out, x)
		}
	}
	return out
}

// valueOf is one series' number: the part f names of a histogram, else
// its value.
func valueOf(x *dto.Metric, f field) float64 {
	switch {
	case f == histSum:
		return x.GetHistogram().GetSampleSum()
	case f == histCount:
		return float64(x.GetHistogram().GetSampleCount())
	case x.Counter != nil:
		return x.GetCounter().GetValue()
	case x.Gauge != nil:
		return x.GetGauge().GetValue()
	default:
		return x.GetUntyped().GetValue()
	}
}

// Sampler reads the sources at a fixed interval and keeps the latest
// samples.
type Sampler struct {
	sources    []Source
	interval   time.Duration
	keep       int
	log        *slog.Logger
	charts     []chartDef
	counters   []counterDef
	breakdowns []breakdownDef
	now        func() time.Time

	mu      sync.Mutex
	samples []sampleValues
	errs    []string
	// builds is what each source's cms_build_info said at the last
	// sample; zero where it did not answer or has no such metric.
	builds []Build
}

// sampleValues holds a sample's numbers in definition order: for each
// chart series its measure (and for a mean, the count after the sum),
// then each counter; and for each breakdown its totals by label value.
type sampleValues struct {
	at     time.Time
	up     []bool
	nums   []float64
	groups []map[string]float64
}

// NewSampler samples sources every interval and keeps keep samples.
func NewSampler(sources []Source, interval time.Duration, keep int, log *slog.Logger) *Sampler {
	return &Sampler{sources: sources, interval: interval, keep: max(keep, 2), log: log,
		charts: charts(), counters: counters(), breakdowns: breakdowns(), errs: make([]string, len(sources)),
		builds: make([]Build, len(sources)), now: time.Now}
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads every source once and records the result.
func (s *Sampler) Sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.interval, time.Second))
	defer cancel()
	fams := make([]map[string]*dto.MetricFamily, len(s.sources))
	errs := make([]string, len(s.sources))
	var wg sync.WaitGroup
	for i, src := range s.sources {
		wg.Go(func() {
			f, err := src.Gather(ctx)
			if err != nil {
				errs[i] = err.Error()
				return
			}
			fams[i] = f
		})
	}
	wg.Wait()
	v := sampleValues{at: s.now(), up: make([]bool, len(s.sources))}
	builds := make([]Build, len(s.sources))
	for i := range s.sources {
		v.up[i] = fams[i] != nil
		builds[i] = buildOf(fams[i])
	}
	sum := func(m measure) float64 {
		var t float64
		for _, f := range fams {
			if f != nil {
				t += read(f, m)
			}
		}
		return t
	}
	for _, c := range s.charts {
		for _, d := range c.series {
			v.nums = append(v.nums, sum(d.m))
			if d.kind == mean {
				v.nums = append(v.nums, sum(measure{d.m.metric, histCount, d.m.match}))
			}
		}
	}
	for _, c := range s.counters {
		v.nums = append(v.nums, sum(c.m))
	}
	for _, b := range s.breakdowns {
		g := map[string]float64{}
		for _, f := range fams {
			if f != nil {
				readBy(f, b.m, b.by, g)
			}
		}
		v.groups = append(v.groups, g)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range errs {
		if e != "" && s.errs[i] != e && s.log != nil {
			s.log.Warn("status page source unreadable", "source", s.sources[i].Name, "err", e)
		}
	}
	s.errs, s.builds = errs, builds
	if len(s.samples) == s.keep {
		s.samples = slices.Delete(s.samples, 0, 1)
	}
	s.samples = append(s.samples, v)
}

// Snapshot is what the page draws, as sent to it.
type Snapshot struct {
	IntervalSeconds float64       `json:"intervalSeconds"`
	Sources         []SourceState `json:"sources"`
	Counters        []Counter     `json:"counters"`
	Breakdowns      []Breakdown   `json:"breakdowns"`
	Charts          []Chart       `json:"charts"`
}

// SourceState says whether a source answered the last sample, and which
// build it runs.
type SourceState struct {
	Name  string `json:"name"`
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
	Build
}

// Build is what a source's cms_build_info names; empty for a source down
// or one that exports no such metric (a release before it did).
type Build struct {
	Version   string `json:"version,omitempty"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion,omitempty"`
}

// buildInfoMetric is the gauge every service exports with its build as
// labels (httpserve.NewRegistry registers it).
const buildInfoMetric = "cms_build_info"

// buildOf reads a source's build from its cms_build_info. A source has
// one series; were there more (a proxy merging instances), the first is
// taken.
func buildOf(fams map[string]*dto.MetricFamily) Build {
	f := fams[buildInfoMetric]
	if f == nil || len(f.GetMetric()) == 0 {
		return Build{}
	}
	var b Build
	for _, l := range f.GetMetric()[0].GetLabel() {
		switch l.GetName() {
		case "version":
			b.Version = l.GetValue()
		case "revision":
			b.Revision = l.GetValue()
		case "goversion":
			b.GoVersion = l.GetValue()
		}
	}
	return b
}

// Counter is a total at the last sample; null unless every source
// answered, since a missing source's part of the sum is unknown.
type Counter struct {
	Label string   `json:"label"`
	Value *float64 `json:"value"`
}

// Breakdown is a total at the last sample split by the values of the
// label By, one row for each value any source exports, largest first.
// Rows is null unless every source answered, as a Counter's value is.
type Breakdown struct {
	Title string         `json:"title"`
	By    string         `json:"by"`
	Unit  string         `json:"unit"`
	Rows  []BreakdownRow `json:"rows"`
}

// BreakdownRow is one label value's total.
type BreakdownRow struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// Chart is a few series over the same times (Unix milliseconds).
type Chart struct {
	Title  string   `json:"title"`
	Unit   string   `json:"unit"`
	Times  []int64  `json:"times"`
	Series []Series `json:"series"`
}

// Series has one value per time of its chart; null where it cannot be
// known (a source did not answer, or nothing was observed).
type Series struct {
	Label  string     `json:"label"`
	Color  string     `json:"color"`
	Values []*float64 `json:"values"`
}

// Snapshot derives the page's numbers from the samples kept.
func (s *Sampler) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{IntervalSeconds: s.interval.Seconds(), Sources: make([]SourceState, len(s.sources))}
	var last *sampleValues
	if n := len(s.samples); n > 0 {
		last = &s.samples[n-1]
	}
	for i, src := range s.sources {
		snap.Sources[i] = SourceState{Name: src.Name, Up: last != nil && last.up[i], Error: s.errs[i], Build: s.builds[i]}
	}
	// Rates and means need two samples; each point stands for the
	// interval ending at its time.
	times := make([]int64, 0, len(s.samples))
	for i := 1; i < len(s.samples); i++ {
		times = append(times, s.samples[i].at.UnixMilli())
	}
	idx := 0
	for _, c := range s.charts {
		chart := Chart{Title: c.title, Unit: c.unit, Times: times}
		for _, d := range c.series {
			ser := Series{Label: d.label, Color: d.color, Values: make([]*float64, len(times))}
			for i := 1; i < len(s.samples); i++ {
				ser.Values[i-1] = point(d.kind, s.samples[i-1], s.samples[i], idx)
			}
			chart.Series = append(chart.Series, ser)
			idx++
			if d.kind == mean {
				idx++
			}
		}
		snap.Charts = append(snap.Charts, chart)
	}
	complete := last != nil && !slices.Contains(last.up, false)
	for _, c := range s.counters {
		cnt := Counter{Label: c.label}
		if complete {
			v := last.nums[idx]
			cnt.Value = &v
		}
		snap.Counters = append(snap.Counters, cnt)
		idx++
	}
	for i, b := range s.breakdowns {
		bd := Breakdown{Title: b.title, By: b.by, Unit: b.unit}
		if complete {
			bd.Rows = make([]BreakdownRow, 0, len(last.groups[i]))
			for k, v := range last.groups[i] {
				bd.Rows = append(bd.Rows, BreakdownRow{k, v})
			}
			slices.SortFunc(bd.Rows, func(a, b BreakdownRow) int {
				return cmp.Or(cmp.Compare(b.Value, a.Value), strings.Compare(a.Key, b.Key))
			})
		}
		snap.Breakdowns = append(snap.Breakdowns, bd)
	}
	return snap
}

// point derives one value from the samples at the start and end of an
// interval, or nil when it cannot: sums over a different set of sources
// do not compare.
func point(k kind, prev, cur sampleValues, i int) *float64 {
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 || !slices.Equal(prev.up, cur.up) || !slices.Contains(cur.up, true) {
		return nil
	}
	var v float64
	switch k {
	case gauge:
		v = cur.nums[i]
	case rate:
		d := cur.nums[i] - prev.nums[i]
		if d < 0 { // a service restarted and its counter began again
			d = cur.nums[i]
		}
		v = d / dt
	case mean:
		n := cur.nums[i+1] - prev.nums[i+1]
		if n <= 0 {
			return nil
		}
		v = (cur.nums[i] - prev.nums[i]) / n
	}
	return &v
}
