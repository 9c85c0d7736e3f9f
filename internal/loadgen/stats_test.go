package loadgen

import (
	"testing"
	"time"
)

func ds(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ds(7), 99, 7 * time.Millisecond},
		{"median odd", ds(1, 2, 3), 50, 2 * time.Millisecond},
		{"median even takes lower", ds(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"p90 of 100", hundred, 90, 90 * time.Millisecond},
		{"p100 is max", hundred, 100, 100 * time.Millisecond},
		{"tiny p is min", hundred, 0.001, 1 * time.Millisecond},
		{"p99 of 10 is max", ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(p%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	l := Summarize(ds(5, 1, 4, 2, 3))
	want := Latency{Count: 5, P50: 3 * time.Millisecond, P90: 5 * time.Millisecond, P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}
	if l != want {
		t.Errorf("Summarize = %+v, want %+v", l, want)
	}
	if (Summarize(nil) != Latency{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

func TestMedianAndCPU(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range cases {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if got := CPUPer100k(2*time.Second, 200000); got != 1 {
		t.Errorf("CPUPer100k = %v, want 1", got)
	}
	if got := CPUPer100k(time.Second, 0); got != 0 {
		t.Errorf("CPUPer100k with no events = %v, want 0", got)
	}
}
