package main

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/loadgen"
)

func TestParseShapes(t *testing.T) {
	cases := []struct {
		in      string
		want    []shape
		wantErr string
	}{
		{"1x1k,5x1K, 50x20k", []shape{{1, 1024}, {5, 1024}, {50, 20480}}, ""},
		{"3x1500", []shape{{3, 1500}}, ""},
		{"5", nil, `"5" is not EVENTSxSIZE`},
		{"0x1k", nil, `"0x1k" is not EVENTSxSIZE`},
		{"5xk", nil, `"5xk" has no size`},
		{"5x-1", nil, `"5x-1" has no size`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseShapes(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseShapes(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("parseShapes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	if s := (shape{5, 20480}).String(); s != "5 × 20 KB" {
		t.Errorf("shape name %q", s)
	}
}

func TestPrintShapes(t *testing.T) {
	ph := func(eps, cpu float64) *phase {
		return &phase{report: &loadgen.Report{EventsPerSec: eps}, proc: &loadgen.Usage{CPUPer100k: cpu}, broker: &loadgen.Usage{CPUPer100k: 0.1}}
	}
	use := func(cpu float64) *loadgen.Usage { return &loadgen.Usage{CPUPer100k: cpu} }
	closed := shapeRuns{
		shape:  shape{5, 1024},
		direct: []*phase{ph(60000, 1.5)}, gateway: []*phase{ph(40000, 2)}, gatewayUse: []*loadgen.Usage{use(1)},
		ceiling: []*phase{ph(50000, 0.7)},
		floor:   []*phase{ph(180000, 0.45)}, proxied: []*phase{ph(30000, 2)}, proxyUse: []*loadgen.Usage{use(2.2)},
	}
	open := closed
	open.ceiling = nil
	cases := []struct {
		name string
		o    options
		runs shapeRuns
		want []string
	}{
		{"closed loop", options{runs: 1, concurrency: 32}, closed, []string{
			"32 workers (the ceiling",
			"| 5 × 1 KB | 60,000 | 1.50 | 0.10 | 40,000 | 2.00 | 1.00 | 50% | 50,000 | 0.70 | 120% |",
			"| 5 × 1 KB | 1.50 | 0.45 | 30% | 50% | 2.20 | 110% |",
		}},
		{"open loop", options{runs: 1, concurrency: 32, shapeRate: 10000}, open, []string{
			"an open loop at 10,000 events/s with at most 128 requests outstanding",
			"| 5 × 1 KB | 60,000 | 1.50 | 0.10 | 40,000 | 2.00 | 1.00 | 50% | – | – | – |",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printShapes(&b, tc.o, 128, []shapeRuns{tc.runs})
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestRunRefusesFloorsAndRatesWithoutShapes(t *testing.T) {
	base := options{runs: 1, concurrency: 1, duration: time.Second}
	cases := []struct {
		name    string
		edit    func(*options)
		wantErr string
	}{
		{"floors alone", func(o *options) { o.floors = true }, "name the shapes"},
		{"rate alone", func(o *options) { o.shapeRate = 100 }, "name the shapes"},
		{"negative rate", func(o *options) { o.shapes, o.shapeRate = "1x1k", -5 }, "-shape-rate must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			err := run(t.Context(), slog.New(slog.DiscardHandler), o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("run = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
