package k8s_test

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadEnv checks the help scan the environment check depends on: it
// must find each binary's own variables, wherever its flags are defined,
// and nothing of the others'.
func TestReadEnv(t *testing.T) {
	built, err := builtEnv()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd     string
		want    []string
		notWant []string
		former  map[string]string
	}{
		{cmd: ingestBin,
			want: []string{"INGEST_ADDR", "KAFKA_BROKERS", "CONTENT_DB", "SHUTDOWN_TIMEOUT", "MAX_BODY_BYTES", "LOG_LEVEL",
				"HTTP_READ_TIMEOUT", "HTTP_WRITE_TIMEOUT", "HTTP_MAX_HEADER_BYTES", "CORS_ALLOWED_ORIGINS"},
			notWant: []string{"API_ADDR", "CONSUMER_GROUP", "CLICKHOUSE_PASSWORD", "READ_TIMEOUT"},
			former:  map[string]string{"READ_HEADER_TIMEOUT": "HTTP_READ_HEADER_TIMEOUT", "READ_TIMEOUT": "HTTP_READ_TIMEOUT", "IDLE_TIMEOUT": "HTTP_IDLE_TIMEOUT", "KAFKA_BATCH_TIMEOUT": "KAFKA_LINGER"}},
		{cmd: consumerBin,
			want:    []string{"CONSUMER_ADDR", "CONSUMER_GROUP", "CLICKHOUSE_PASSWORD", "TOPIC_PARTITIONS", "HTTP_IDLE_TIMEOUT", "DEBUG_ADDR"},
			notWant: []string{"INGEST_ADDR", "CONTENT_DB", "CORS_ALLOWED_ORIGINS"},
			former:  map[string]string{}},
		{cmd: apiBin,
			want: []string{"CONTENT_DB", "LOG_LEVEL", "API_ADDR", "RAG_LLM_API_KEY", "GRAPHQL_MAX_BODY_BYTES", "HTTP_READ_HEADER_TIMEOUT",
				"KAFKA_BROKERS", "EVENTS_TOPIC", "KAFKA_SASL_PASSWORD", "LIVE_MAX_WATCHERS"},
			notWant: []string{"GATEWAY_ADDR", "INGEST_URL", "TOPIC_PARTITIONS", "TOPIC_REPLICATION"},
			former:  map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(path.Base(tc.cmd), func(t *testing.T) {
			got, ok := built[tc.cmd]
			if !ok {
				t.Fatalf("%s not built", tc.cmd)
			}
			for _, n := range tc.want {
				if !got.read[n] {
					t.Errorf("%s missing from %v", n, sortedKeys(got.read))
				}
			}
			for _, n := range tc.notWant {
				if got.read[n] {
					t.Errorf("%s found, but %s does not read it", n, tc.cmd)
				}
			}
			if !maps.Equal(got.former, tc.former) {
				t.Errorf("former names %v, want %v", got.former, tc.former)
			}
		})
	}
}

// TestReadEnvParsesHelp runs stand-ins for binaries that print a given
// help.
func TestReadEnvParsesHelp(t *testing.T) {
	cases := []struct {
		name, help string
		want       []string
		former     map[string]string
		wantErr    string
	}{
		{name: "variables", help: "  -addr string\n    \tlisten address (env SVC_ADDR) (default \":1\")\n  -n int\n    \tcount (env N)\n",
			want: []string{"SVC_ADDR", "N"}, former: map[string]string{}},
		{name: "former names", help: "  -t duration\n    \ttimeout (env HTTP_T) (formerly T, OLD_T, deprecated) (default 5s)\n",
			want: []string{"HTTP_T"}, former: map[string]string{"T": "HTTP_T", "OLD_T": "HTTP_T"}},
		{name: "secret from a file", help: "  -password string\n    \tpassword (env SVC_PASSWORD or SVC_PASSWORD_FILE)\n",
			want: []string{"SVC_PASSWORD", "SVC_PASSWORD_FILE"}, former: map[string]string{}},
		{name: "no variables", help: "Usage of svc:\n  -n int\n    \tcount\n", wantErr: "names no environment variable"},
		{name: "lower case is no variable", help: "  -n int\n    \tcount (env n)\n", wantErr: "names no environment variable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "svc")
			script := "#!/bin/sh\nprintf '%s' '" + strings.ReplaceAll(tc.help, "'", `'\''`) + "' >&2\nexit 2\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := readEnv(t.Context(), bin, [][]string{nil})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sortedKeys(got.read), slices.Sorted(slices.Values(tc.want))) || !maps.Equal(got.former, tc.former) {
				t.Errorf("read %v, former %v; want %v, %v", sortedKeys(got.read), got.former, tc.want, tc.former)
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
