package k8s_test

import (
	"strings"
	"testing"
)

// TestReadEnv checks the source scan the environment check depends on:
// it must find each binary's own variables and nothing of the others'.
func TestReadEnv(t *testing.T) {
	cases := []struct {
		name    string
		dir     string
		funcs   []string
		want    []string
		notWant []string
		wantErr string
	}{
		{name: "ingest", dir: "../../cmd/ingest", funcs: []string{"run"},
			want:    []string{"INGEST_ADDR", "KAFKA_BROKERS", "CONTENT_DB", "SHUTDOWN_TIMEOUT", "MAX_BODY_BYTES"},
			notWant: []string{"API_ADDR", "CONSUMER_GROUP", "CLICKHOUSE_PASSWORD"}},
		{name: "consumer", dir: "../../cmd/consumer", funcs: []string{"run"},
			want:    []string{"CONSUMER_ADDR", "CONSUMER_GROUP", "CLICKHOUSE_PASSWORD", "TOPIC_PARTITIONS"},
			notWant: []string{"INGEST_ADDR", "CONTENT_DB"}},
		{name: "api serve", dir: "../../cmd/api", funcs: []string{"run", "serve"},
			want:    []string{"CONTENT_DB", "LOG_LEVEL", "API_ADDR", "RAG_LLM_API_KEY", "GRAPHQL_MAX_BODY_BYTES"},
			notWant: []string{"GATEWAY_ADDR", "INGEST_URL", "KAFKA_BROKERS"}},
		{name: "missing function", dir: "../../cmd/ingest", funcs: []string{"run", "serve"}, wantErr: "no function serve"},
		{name: "function without flags", dir: "../../cmd/ingest", funcs: []string{"main"}, wantErr: "defines no environment-backed flags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readEnv(tc.dir, tc.funcs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.want {
				if !got[n] {
					t.Errorf("%s missing from %v", n, sortedKeys(got))
				}
			}
			for _, n := range tc.notWant {
				if got[n] {
					t.Errorf("%s found, but %s does not read it", n, tc.name)
				}
			}
		})
	}
}

func TestParseQuantity(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "250m", want: 0.25},
		{in: "1", want: 1},
		{in: "1.5", want: 1.5},
		{in: "512Mi", want: 512 << 20},
		{in: "1Gi", want: 1 << 30},
		{in: "1G", want: 1e9},
		{in: "100k", want: 1e5},
		{in: "", bad: true},
		{in: "lots", bad: true},
		{in: "-1", bad: true},
		{in: "1Zi", bad: true},
	}
	for _, tc := range cases {
		got, err := parseQuantity(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("parseQuantity(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseNginxSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "2m", want: 2 << 20},
		{in: "5M", want: 5 << 20},
		{in: "512k", want: 512 << 10},
		{in: "1g", want: 1 << 30},
		{in: "1048576", want: 1 << 20},
		{in: "", bad: true},
		{in: "1.5m", bad: true},
		{in: "2mb", bad: true},
	}
	for _, tc := range cases {
		got, err := parseNginxSize(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("parseNginxSize(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
