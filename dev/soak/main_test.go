package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestShortSoak runs the whole command briefly: the stack, the load, the
// check in ClickHouse and the report.
func TestShortSoak(t *testing.T) {
	var out, logs bytes.Buffer
	err := run(t.Context(), []string{"-rate", "1000", "-duration", "15s", "-warmup", "5s", "-sample", "1s",
		"-memory-growth", "1", "-memory-slack-mib", "128"}, &out, &logs)
	if err != nil {
		t.Fatalf("soak: %v\n%s\n%s", err, out.String(), logs.String())
	}
	report := out.String()
	t.Log(report)
	m := regexp.MustCompile(`events acknowledged \(200\)\s+(\d+)`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no acknowledged count in the report")
	}
	// 15 s at 1,000 events/s on a shared machine: at least half of it.
	if n, _ := strconv.Atoi(m[1]); n < 7500 {
		t.Errorf("only %d events acknowledged", n)
	}
	for _, want := range []string{"missing 0, duplicates 0", "freshness (ingest to row)", "consumer lag", "ingest ", "consumer ", "broker ", "clickhouse "} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func TestParseRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-rate", "0"},
		{"-duration", "1m", "-warmup", "2m"},
		{"-batch", "-1"},
		{"-nonsense"},
	} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestQuantileReadsTheRunsObservations(t *testing.T) {
	hist := func(counts ...uint64) *dto.Histogram {
		h := &dto.Histogram{}
		var total uint64
		for i, c := range counts {
			total += c
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(0.1 * float64(int(1)<<i)), CumulativeCount: proto.Uint64(total)})
		}
		h.SampleCount = proto.Uint64(total)
		return h
	}
	// Before the run: 100 slow observations; during it: 90 fast, 10 slow.
	first := hist(0, 0, 100)
	last := hist(90, 0, 110)
	for _, tc := range []struct {
		q    float64
		want string
	}{{0.5, (100 * time.Millisecond).String()}, {0.9, (100 * time.Millisecond).String()}, {0.99, (400 * time.Millisecond).String()}} {
		if got := quantile(first, last, tc.q); got != tc.want {
			t.Errorf("q%.2f = %s, want %s", tc.q, got, tc.want)
		}
	}
	if got := quantile(last, last, 0.5); got != "n/a" {
		t.Errorf("no observations: %s", got)
	}
}
