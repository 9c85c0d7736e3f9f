package analyticspage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
)

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		query     string
		app       string
		days      int
		errField  string
		errSubstr string
	}{
		{"", "", DefaultDays, "", ""},
		{"app=demo-app", "demo-app", DefaultDays, "", ""},
		{"app=demo-app&days=1", "demo-app", 1, "", ""},
		{"app=demo-app&days=366", "demo-app", 366, "", ""},
		{"app=a%27b&days=7", "a'b", 7, "", ""},
		{"days=0", "", 0, "days", "from 1 to 366"},
		{"days=367", "", 0, "days", "from 1 to 366"},
		{"days=-3", "", 0, "days", "from 1 to 366"},
		{"days=1.5", "", 0, "days", `"1.5"`},
		{"days=thirty", "", 0, "days", `"thirty"`},
		{"app=" + strings.Repeat("a", 201), "", 0, "app", "at most 200"},
		{"app=a%01b", "", 0, "app", "control character"},
		{"app=%ff", "", 0, "app", "UTF-8"},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseParams(q)
		if tc.errField != "" {
			var pe *paramError
			if !errors.As(err, &pe) || pe.field != tc.errField || !strings.Contains(pe.msg, tc.errSubstr) {
				t.Errorf("%q: error %v, want one about %s saying %q", tc.query, err, tc.errField, tc.errSubstr)
			}
			continue
		}
		if err != nil || p.app != tc.app || p.days != tc.days {
			t.Errorf("%q: %+v, %v; want app %q, %d days", tc.query, p, err, tc.app, tc.days)
		}
	}
}

// fakeSource answers with fixed reports and remembers what was asked.
type fakeSource struct {
	reports  map[string]analyticsreport.Report
	apps     []string
	err      error
	from, to time.Time
}

func (f *fakeSource) Report(_ context.Context, app string, from, to time.Time) (analyticsreport.Report, error) {
	f.from, f.to = from, to
	if f.err != nil {
		return analyticsreport.Report{}, f.err
	}
	r, ok := f.reports[app]
	if !ok {
		r = analyticsreport.Report{AppID: app, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly)}
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			r.Days = append(r.Days, analyticsreport.DayFigures{Day: d.Format(time.DateOnly)})
		}
	}
	return r, nil
}

func (f *fakeSource) ReportApps(_ context.Context, from, to time.Time, limit int) ([]string, error) {
	f.from, f.to = from, to
	return f.apps, f.err
}

var today = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)

// sampleReport has every series above zero but errors, on two days of
// three, and text that must be escaped.
func sampleReport() analyticsreport.Report {
	c := 0.8125
	return analyticsreport.Report{
		AppID: "demo-app", From: "2026-11-23", To: "2026-11-25",
		Days: []analyticsreport.DayFigures{
			{Day: "2026-11-23"},
			{Day: "2026-11-24", Conversations: 3, Users: 2, Turns: 5, FallbackTurns: 1, KnowledgeBaseTurns: 2},
			{Day: "2026-11-25", Conversations: 40, Users: 31, Turns: 75, FallbackTurns: 9, KnowledgeBaseTurns: 1},
		},
		Totals: analyticsreport.Totals{Conversations: 42, Users: 32, Turns: 80, FallbackTurns: 10, KnowledgeBaseTurns: 3,
			FallbackRate: 0.125, KnowledgeBaseShare: 0.0375, MeanConfidence: &c},
		Intents: []analyticsreport.IntentFigures{
			{Intent: "OrderStatus", Matched: 50, LowConfidence: 5, MeanConfidence: &c},
			{Intent: "OpeningHours", Matched: 20},
		},
		Unanswered: []analyticsreport.UnansweredQuestion{{Query: "<b>blah</b> & co", Times: 7, Users: 6}},
		Sessions: analyticsreport.SessionOutcomes{
			Outcome: analyticsreport.Outcome{Sessions: 42, Answered: 30, Fallback: 8, WithoutTurn: 4},
			Endings: []analyticsreport.Ending{{Handler: "OrderStatus", Outcome: analyticsreport.Outcome{Sessions: 38, Answered: 30, Fallback: 8}},
				{Handler: "LaunchRequest", Outcome: analyticsreport.Outcome{Sessions: 4, WithoutTurn: 4}}},
		},
	}
}

func newHandler(src Source) *Handler {
	h := New(src, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.now = func() time.Time { return today.Add(22 * time.Hour) }
	return h
}

func get(t *testing.T, h http.Handler, target string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String(), rec.Header()
}

// rectRE finds a bar: its width, height and colour.
var rectRE = regexp.MustCompile(`<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" fill="(#[0-9a-f]{6})" fill-opacity="0.2">`)

// barsByColor counts the bars of each colour and their area.
func barsByColor(body string) (bars, area map[string]int) {
	bars, area = map[string]int{}, map[string]int{}
	for _, m := range rectRE.FindAllStringSubmatch(body, -1) {
		w, _ := strconv.Atoi(m[3])
		h, _ := strconv.Atoi(m[4])
		bars[m[5]]++
		area[m[5]] += w * h
	}
	return bars, area
}

func TestPage(t *testing.T) {
	broken := &fakeSource{err: errors.New("connection refused")}
	src := &fakeSource{reports: map[string]analyticsreport.Report{"demo-app": sampleReport()}, apps: []string{"demo-app", "other app"}}
	for _, tc := range []struct {
		name   string
		src    Source
		target string
		code   int
		want   []string
		absent []string
		// bars is how many bars of each colour the page draws.
		bars map[string]int
	}{
		{name: "no ClickHouse", src: nil, target: "/analytics?app=demo-app", code: 503, want: []string{"CLICKHOUSE_ADDR", `href="/status"`}},
		{name: "bad days", src: src, target: "/analytics?app=demo-app&days=0", code: 400,
			want: []string{"days is &#34;0&#34;: want a whole number from 1 to 366.", `<form method="get" action="/analytics">`}, absent: []string{"<svg"}},
		{name: "bad app", src: src, target: "/analytics?app=a%00", code: 400, want: []string{"control character"}},
		{name: "ClickHouse fails", src: broken, target: "/analytics?app=demo-app", code: 503,
			want: []string{"could not be read from ClickHouse"}, absent: []string{"connection refused"}},
		{name: "no app: the apps to choose from", src: src, target: "/analytics?days=7", code: 200,
			want: []string{`<a href="/analytics?app=demo-app&amp;days=7">demo-app</a>`, `<a href="/analytics?app=other%20app&amp;days=7">other app</a>`,
				"from 2026-11-19 to 2026-11-25"}, absent: []string{"<svg"}},
		{name: "an app without events", src: src, target: "/analytics?app=nobody", code: 200,
			want: []string{"App &#34;nobody&#34; has no events from 2026-10-27 to 2026-11-25.", "?app=demo-app&amp;days=30"}, absent: []string{"<svg"}},
		{name: "an app with events", src: src, target: "/analytics?app=demo-app&days=3", code: 200,
			want: []string{
				"demo-app <small>2026-11-23 to 2026-11-25 (UTC)", `href="/status"`, `href="/analytics/data?app=demo-app&amp;days=3"`,
				"Conversations<b>42</b>", "Users<b>32</b>", "Turns<b>80</b>", "Fallback rate<b>12.5%</b>", "Error rate<b>0.0%</b>",
				"Knowledge-base share<b>3.8%</b>", "Mean confidence<b>0.81</b>",
				"conversations: 42", "users: 32", "answered: 70", "fallback: 10", "knowledge base: 3", "errors: 0",
				"<title>2026-11-25 conversations: 40</title>", "<title>2026-11-24 fallback: 1</title>",
				`>OrderStatus</td><td class="n" >50</td><td class="n" >5</td><td class="n" >0.81</td>`,
				`>OpeningHours</td><td class="n" >20</td><td class="n" >0</td><td class="n" >–</td>`,
				"&lt;b&gt;blah&lt;/b&gt; &amp; co</td>", `>answered</td><td class="n" >30</td><td class="n" >71.4%</td>`,
				`>LaunchRequest</td><td class="n" >4</td>`, ">Nov 25</text>",
			},
			absent: []string{"<b>blah</b>", "<script"},
			bars: map[string]int{ColorConversations: 2, ColorUsers: 2, ColorAnswered: 2, ColorFallback: 2, ColorKnowledgeBase: 2,
				ColorIntentMatched: 2, ColorIntentLowConfidence: 1, ColorUnanswered: 1,
				ColorOutcomeAnswered: 1, ColorOutcomeFallback: 1, ColorOutcomeWithoutTurn: 1, ColorEnding: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, header := get(t, newHandler(tc.src).PageHandler(), tc.target)
			if code != tc.code {
				t.Errorf("status %d, want %d:\n%s", code, tc.code, body)
			}
			if ct := header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if csp := header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Errorf("Content-Security-Policy %q: want no scripts", csp)
			}
			for _, s := range tc.want {
				if !strings.Contains(body, s) {
					t.Errorf("no %s in\n%s", s, body)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(body, s) {
					t.Errorf("%s in the page", s)
				}
			}
			if tc.bars == nil {
				return
			}
			bars, area := barsByColor(body)
			if !reflect.DeepEqual(bars, tc.bars) {
				t.Errorf("bars by colour %v, want %v", bars, tc.bars)
			}
			for c := range tc.bars {
				if area[c] < minBar*minBar {
					t.Errorf("bars of %s cover %d pixels", c, area[c])
				}
			}
		})
	}
}

// The day range ends today (UTC) and holds days days.
func TestDayRange(t *testing.T) {
	src := &fakeSource{}
	h := newHandler(src)
	for _, days := range []int{1, 30, 366} {
		get(t, h.DataHandler(), "/analytics/data?app=x&days="+strconv.Itoa(days))
		if !src.to.Equal(today) || !src.from.Equal(today.AddDate(0, 0, 1-days)) {
			t.Errorf("%d days: %v to %v", days, src.from, src.to)
		}
	}
}

func TestData(t *testing.T) {
	src := &fakeSource{reports: map[string]analyticsreport.Report{"demo-app": sampleReport()}}
	for _, tc := range []struct {
		name   string
		src    Source
		target string
		code   int
		field  string
	}{
		{"no ClickHouse", nil, "/analytics/data?app=demo-app", 503, ""},
		{"no app", src, "/analytics/data", 400, "app"},
		{"bad days", src, "/analytics/data?app=demo-app&days=400", 400, "days"},
		{"ClickHouse fails", &fakeSource{err: errors.New("down")}, "/analytics/data?app=demo-app", 503, ""},
		{"the report", src, "/analytics/data?app=demo-app&days=3", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, header := get(t, newHandler(tc.src).DataHandler(), tc.target)
			if code != tc.code || header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %s, want %d: %s", code, header.Get("Content-Type"), tc.code, body)
			}
			if code != 200 {
				var e struct{ Field, Message string }
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Field != tc.field || e.Message == "" {
					t.Errorf("error %s (%v), want field %q and a message", body, err, tc.field)
				}
				return
			}
			var got analyticsreport.Report
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if want := sampleReport(); !reflect.DeepEqual(got, want) {
				t.Errorf("report %+v, want %+v", got, want)
			}
		})
	}
}

func TestDayChart(t *testing.T) {
	days := make([]analyticsreport.DayFigures, 30)
	for i := range days {
		days[i].Day = today.AddDate(0, 0, i-29).Format(time.DateOnly)
	}
	days[29].Turns, days[29].FallbackTurns, days[28].Errors = 1000, 1, 3
	c := dayChart(days, []series{
		{label: "answered", color: ColorAnswered, value: answered},
		{label: "fallback", color: ColorFallback, value: func(d analyticsreport.DayFigures) uint64 { return d.FallbackTurns }},
		{label: "errors", color: ColorErrors, value: func(d analyticsreport.DayFigures) uint64 { return d.Errors }},
	})
	if len(c.Bars) != 3 {
		t.Fatalf("bars %+v, want one of each value above zero", c.Bars)
	}
	if c.Grid[2].Label != "1000" || c.Grid[2].Y != padTop {
		t.Errorf("axis top %+v, want 1000 at the top", c.Grid[2])
	}
	end := 0
	for _, b := range c.Bars {
		// A small count stays visible, every bar sits on the axis within
		// the plot, and bars do not overlap.
		if b.H < minBar || b.W < 2 || b.Y+b.H != chartHeight-padBottom || b.Y < padTop || b.X < padLeft || b.X+b.W > chartWidth-padRight {
			t.Errorf("bar %+v", b)
		}
		if b.X < end {
			t.Errorf("bar %+v overlaps the one before", b)
		}
		end = b.X + b.W
	}
	if c.Bars[1].H != plotHeight() { // 999 answered turns, of an axis up to 1000
		t.Errorf("the largest value is %d pixels high, want the plot's %d", c.Bars[1].H, plotHeight())
	}
}

func plotHeight() int { return chartHeight - padTop - padBottom }

func TestNiceCeil(t *testing.T) {
	for v, want := range map[uint64]uint64{0: 2, 1: 2, 2: 2, 3: 5, 7: 10, 11: 20, 75: 100, 101: 200, 499: 500, 5000: 5000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", v, got, want)
		}
	}
}

// Every series' tint (its colour at FillOpacity over white) differs from
// every other's, and from what the edges of other shapes blend to, by
// more than a screenshot's rounding, so that counting a tint's pixels
// counts that series alone: an edge pixel partly covered by a bar, a
// solid legend swatch or grey text is white mixed with some of that
// colour, which must never come out as another series' tint.
func TestPaletteTintsAreDistinct(t *testing.T) {
	colors := []string{ColorConversations, ColorUsers, ColorAnswered, ColorFallback, ColorKnowledgeBase, ColorErrors,
		ColorIntentMatched, ColorIntentLowConfidence, ColorUnanswered, ColorOutcomeAnswered, ColorOutcomeFallback,
		ColorOutcomeError, ColorOutcomeWithoutTurn, ColorEnding}
	// Drawn solid besides the series: text, links, grid lines; and the
	// blue no series has, which the live test counts as a control.
	others := []string{"#222222", "#444444", "#555555", "#777777", "#dddddd", "#0000ff"}
	rgb := func(c string) [3]float64 {
		var out [3]float64
		for i := range out {
			v, err := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
			if err != nil {
				t.Fatalf("colour %s: %v", c, err)
			}
			out[i] = float64(v)
		}
		return out
	}
	// tint is c at FillOpacity over white, as a screenshot test expects it.
	tint := func(c string) [3]float64 {
		v := rgb(c)
		for i := range v {
			v[i] = 255 - float64(int(255-v[i])*20/100)
		}
		return v
	}
	// blendsInto reports whether c laid at some coverage of opacity over
	// white comes within 3 of target in every channel.
	blendsInto := func(c string, opacity float64, target [3]float64) bool {
		v := rgb(c)
		for k := 1; k <= 1000; k++ {
			a := opacity * float64(k) / 1000
			near := true
			for i := range v {
				near = near && math.Abs(math.Round(255-a*(255-v[i]))-target[i]) <= 3
			}
			if near {
				return true
			}
		}
		return false
	}
	for _, a := range colors {
		for _, b := range colors {
			if a != b && (blendsInto(a, FillOpacity, tint(b)) || blendsInto(a, 1, tint(b))) {
				t.Errorf("the edges of %s can blend into the tint of %s", a, b)
			}
		}
		for _, o := range others {
			if blendsInto(o, 1, tint(a)) {
				t.Errorf("the edges of %s can blend into the tint of %s", o, a)
			}
		}
		if blendsInto(a, 1, tint("#0000ff")) || blendsInto(a, FillOpacity, tint("#0000ff")) {
			t.Errorf("the edges of %s can blend into the tint no series has", a)
		}
	}
}
