package loadgen

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Latency summarises recorded request durations.
type Latency struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50"`
	P90   time.Duration `json:"p90"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value that at least p% of the values do not exceed.
// It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize sorts d in place and returns its percentiles.
func Summarize(d []time.Duration) Latency {
	slices.Sort(d)
	l := Latency{Count: len(d)}
	if len(d) == 0 {
		return l
	}
	l.P50 = Percentile(d, 50)
	l.P90 = Percentile(d, 90)
	l.P99 = Percentile(d, 99)
	l.Max = d[len(d)-1]
	return l
}

// CPUPer100k is the CPU time spent per 100,000 events, in seconds.
func CPUPer100k(cpu time.Duration, events int64) float64 {
	if events <= 0 {
		return 0
	}
	return cpu.Seconds() / float64(events) * 100000
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
