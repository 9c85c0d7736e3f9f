package analyticspage

import (
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
)

// The colour of each series. Bars are filled with it at 20% opacity over
// white and legends show it solid, so that every pixel of a series' tint
// on a screenshot is a drawn value; no two tints are alike.
const (
	ColorConversations       = "#1f78b4"
	ColorUsers               = "#b15928"
	ColorAnswered            = "#33a02c"
	ColorFallback            = "#ff7f00"
	ColorKnowledgeBase       = "#6a3d9a"
	ColorErrors              = "#e31a1c"
	ColorIntentMatched       = "#1b9e77"
	ColorIntentLowConfidence = "#d95f02"
	ColorUnanswered          = "#e7298a"
	ColorOutcomeAnswered     = "#66a61e"
	ColorOutcomeFallback     = "#e6ab02"
	ColorOutcomeError        = "#a50f15"
	ColorOutcomeWithoutTurn  = "#8da0cb"
	ColorEnding              = "#01665e"
)

// FillOpacity is how strongly bars are filled with their series' colour.
const FillOpacity = 0.2

//go:embed page.html
var pageSource string

// page is parsed once; templates are safe for concurrent use.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"opacity":  func() float64 { return FillOpacity },
	"barWidth": func() int { return barWidth },
	"chartOf":  func(title string, c chart, note string) titledChart { return titledChart{title, c, note} },
}).Parse(pageSource))

// titledChart is a chart with its heading and a note under it.
type titledChart struct {
	Title string
	Chart chart
	Note  string
}

// view is what the template draws.
type view struct {
	App               string
	Days              int
	DefaultDays       int
	MaxDays           int
	From, To          string
	Problem, Notice   string
	Apps              []string
	Report            *analyticsreport.Report
	Figures           []figure
	Activity, Turns   chart
	Intents           []row
	Unanswered        []row
	Outcomes, Endings []row
}

// figure is one headline number.
type figure struct{ Label, Value string }

// chart is a bar chart by day, laid out in whole pixels so that bars have
// crisp edges.
type chart struct {
	Width, Height int
	Grid          []gridLine
	Ticks         []tick
	Bars          []rect
	Legend        []legendEntry
}

type gridLine struct {
	Y     int
	X2    int
	Label string
}

type tick struct {
	X     int
	Y     int
	Label string
}

type rect struct {
	X, Y, W, H int
	Color      string
	Title      string
}

type legendEntry struct{ Label, Color, Total string }

// row is a table row with a bar drawn at its end.
type row struct {
	Cells []string
	Bars  []rect
}

// series is one value of each day, drawn in one colour.
type series struct {
	label, color string
	value        func(analyticsreport.DayFigures) uint64
	total        uint64
}

// Chart geometry, in pixels.
const (
	chartWidth  = 1200
	chartHeight = 170
	padLeft     = 48
	padRight    = 8
	padTop      = 8
	padBottom   = 22
	// minBar is the least height (or width) of a bar of a value above
	// zero, so that a small count is seen and a zero never is.
	minBar   = 4
	barWidth = 80 // the bars in tables
	barH     = 12
)

// draw lays out the report.
func (v *view) draw(r analyticsreport.Report) {
	v.Report = &r
	t := r.Totals
	v.Figures = []figure{
		{"Conversations", count(t.Conversations)},
		{"Users", count(t.Users)},
		{"Turns", count(t.Turns)},
		{"Fallback rate", percent(t.FallbackRate)},
		{"Error rate", percent(t.ErrorRate)},
		{"Knowledge-base share", percent(t.KnowledgeBaseShare)},
		{"Mean confidence", confidence(t.MeanConfidence)},
	}
	v.Activity = dayChart(r.Days, []series{
		{label: "conversations", color: ColorConversations, value: func(d analyticsreport.DayFigures) uint64 { return d.Conversations }, total: t.Conversations},
		{label: "users", color: ColorUsers, value: func(d analyticsreport.DayFigures) uint64 { return d.Users }, total: t.Users},
	})
	v.Turns = dayChart(r.Days, []series{
		{label: "answered", color: ColorAnswered, value: answered, total: t.Turns - min(t.FallbackTurns, t.Turns)},
		{label: "fallback", color: ColorFallback, value: func(d analyticsreport.DayFigures) uint64 { return d.FallbackTurns }, total: t.FallbackTurns},
		{label: "knowledge base", color: ColorKnowledgeBase, value: func(d analyticsreport.DayFigures) uint64 { return d.KnowledgeBaseTurns }, total: t.KnowledgeBaseTurns},
		{label: "errors", color: ColorErrors, value: func(d analyticsreport.DayFigures) uint64 { return d.Errors }, total: t.Errors},
	})

	var most uint64
	for _, in := range r.Intents {
		most = max(most, in.Matched)
	}
	for _, in := range r.Intents {
		low := min(in.LowConfidence, in.Matched)
		v.Intents = append(v.Intents, row{
			Cells: []string{in.Intent, count(in.Matched), count(in.LowConfidence), confidence(in.MeanConfidence)},
			Bars: hbar(most, []uint64{in.Matched - low, low}, []string{ColorIntentMatched, ColorIntentLowConfidence},
				[]string{"confident", "low confidence"}),
		})
	}
	most = 0
	for _, q := range r.Unanswered {
		most = max(most, q.Times)
	}
	for _, q := range r.Unanswered {
		v.Unanswered = append(v.Unanswered, row{
			Cells: []string{q.Query, count(q.Times), count(q.Users)},
			Bars:  hbar(most, []uint64{q.Times}, []string{ColorUnanswered}, []string{"asked"}),
		})
	}
	s := r.Sessions
	for _, o := range []struct {
		label, color string
		n            uint64
	}{
		{"answered", ColorOutcomeAnswered, s.Answered},
		{"fallback", ColorOutcomeFallback, s.Fallback},
		{"error", ColorOutcomeError, s.Error},
		{"no turn", ColorOutcomeWithoutTurn, s.WithoutTurn},
	} {
		v.Outcomes = append(v.Outcomes, row{
			Cells: []string{o.label, count(o.n), share(o.n, s.Sessions)},
			Bars:  hbar(s.Sessions, []uint64{o.n}, []string{o.color}, []string{o.label}),
		})
	}
	most = 0
	for _, e := range s.Endings {
		most = max(most, e.Sessions)
	}
	for _, e := range s.Endings {
		handler := e.Handler
		if handler == "" {
			handler = "(none)"
		}
		v.Endings = append(v.Endings, row{
			Cells: []string{handler, count(e.Sessions), count(e.Answered), count(e.Fallback), count(e.Error)},
			Bars:  hbar(most, []uint64{e.Sessions}, []string{ColorEnding}, []string{"sessions"}),
		})
	}
}

// answered is a day's turns that did not fall back.
func answered(d analyticsreport.DayFigures) uint64 { return d.Turns - min(d.FallbackTurns, d.Turns) }

// dayChart draws each day's values of the series as a group of bars side
// by side: knowledge-base turns are also answered or fallback turns, so
// stacking would count them twice.
func dayChart(days []analyticsreport.DayFigures, ss []series) chart {
	c := chart{Width: chartWidth, Height: chartHeight}
	plotW, plotH := chartWidth-padLeft-padRight, chartHeight-padTop-padBottom
	var hi uint64
	for _, d := range days {
		for _, s := range ss {
			hi = max(hi, s.value(d))
		}
	}
	top := niceCeil(hi)
	for _, f := range []uint64{0, 1, 2} {
		v := top * f / 2
		c.Grid = append(c.Grid, gridLine{Y: padTop + plotH - int(math.Round(float64(v)/float64(top)*float64(plotH))),
			X2: chartWidth - padRight, Label: count(v)})
	}
	for _, s := range ss {
		c.Legend = append(c.Legend, legendEntry{Label: s.label, Color: s.color, Total: count(s.total)})
	}
	if len(days) == 0 {
		return c
	}
	slot := float64(plotW) / float64(len(days))
	bw := max(1, int(slot*0.8)/len(ss))
	every := (len(days) + 9) / 10 // at most about ten dates under the axis
	for i, d := range days {
		x0 := padLeft + int(math.Round(float64(i)*slot+(slot-float64(bw*len(ss)))/2))
		for j, s := range ss {
			v := s.value(d)
			if v == 0 {
				continue
			}
			h := max(minBar, int(math.Round(float64(v)/float64(top)*float64(plotH))))
			c.Bars = append(c.Bars, rect{X: x0 + j*bw, Y: padTop + plotH - h, W: bw, H: h, Color: s.color,
				Title: fmt.Sprintf("%s %s: %d", d.Day, s.label, v)})
		}
		if i%every == 0 || i == len(days)-1 {
			c.Ticks = append(c.Ticks, tick{X: padLeft + int(math.Round((float64(i)+0.5)*slot)), Y: chartHeight - 6, Label: dayLabel(d.Day)})
		}
	}
	return c
}

// hbar draws values side by side in a bar of barWidth pixels for most.
func hbar(most uint64, values []uint64, colors, labels []string) []rect {
	var out []rect
	x := 0
	for i, v := range values {
		if v == 0 || most == 0 {
			continue
		}
		w := max(minBar, int(math.Round(float64(v)/float64(most)*barWidth)))
		out = append(out, rect{X: x, Y: 0, W: w, H: barH, Color: colors[i], Title: labels[i] + ": " + strconv.FormatUint(v, 10)})
		x += w
	}
	return out
}

// niceCeil is the least of 2, 5 and 10 times a power of ten at or above
// v: the top of an axis with a whole number half way.
func niceCeil(v uint64) uint64 {
	for p := uint64(1); ; p *= 10 {
		for _, m := range []uint64{2, 5, 10} {
			if m*p >= v {
				return m * p
			}
		}
	}
}

func dayLabel(day string) string {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return day
	}
	return t.Format("Jan 2")
}

func count(n uint64) string { return strconv.FormatUint(n, 10) }

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func share(n, of uint64) string {
	if of == 0 {
		return "–"
	}
	return percent(float64(n) / float64(of))
}

func confidence(c *float64) string {
	if c == nil {
		return "–"
	}
	return strconv.FormatFloat(*c, 'f', 2, 64)
}
