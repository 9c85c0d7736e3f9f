package main

import (
	"bytes"
	"context"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/pkg/content/encoder"
)

func TestServeConfiguredByEnvironmentStopsCleanly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cms.db")
	var out bytes.Buffer
	if code := run(t.Context(), []string{"-content-db", db, "import", "../../deploy/demo/content.yaml"}, noEnv, &out, &out); code != 0 {
		t.Fatalf("import: %d %s", code, out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"-content-db", db, "demo", "--quiet"}, noEnv, &out, &out); code != 0 {
		t.Fatalf("demo: %d %s", code, out.String())
	}
	token := strings.TrimSpace(out.String())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := map[string]string{"CONTENT_DB": db, "API_ADDR": addr, "RATE_LIMIT_RPS": "0", "LOG_LEVEL": "info"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs childproc.Output
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, lookup, &logs, &logs) }()

	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(req)
	}
	// Generous: a loaded machine reads the encoder's 28 MB and builds the
	// content's index slowly; readiness is what is awaited.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := get("/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within a minute: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := get("/cms/handler/OpeningHours")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("demo handler: %d", resp.StatusCode)
	}
	id := resp.Header.Get("X-Request-Id")

	// Started without OPERATOR_ADDR, the operator pages are not on the
	// listen address but on a loopback port the log names.
	for _, path := range []string{"/metrics", "/status", "/analytics?app=demo-app", "/debug/pprof/"} {
		resp, err := get(path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s on the listen address: %d, want 404", path, resp.StatusCode)
		}
	}
	m := regexp.MustCompile(`"msg":"api operator endpoints listening","addr":"(127\.0\.0\.1:\d+)"`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("the log names no loopback operator address:\n%s", logs.String())
	}
	for _, path := range []string{"/metrics", "/status"} {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s on the operator address %s: %d", path, m[1], resp.StatusCode)
		}
	}

	cancel() // as SIGTERM does
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d\n%s", code, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("api serve did not stop within 15s")
	}
	for _, want := range []string{`"msg":"api listening"`, `"request_id":"` + id + `"`, `"msg":"api stopped"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

func TestServeRefusesBadStatusSources(t *testing.T) {
	env := map[string]string{"CONTENT_DB": filepath.Join(t.TempDir(), "cms.db"), "API_ADDR": "127.0.0.1:0", "STATUS_SOURCES": "ingest=ftp://127.0.0.1/metrics"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var out bytes.Buffer
	if code := run(t.Context(), []string{"serve"}, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), "status source ingest") {
		t.Errorf("exit %d, output %q: want a failure naming the status source", code, out.String())
	}
}

func TestServeRefusesUnreadableClickHouseCA(t *testing.T) {
	env := map[string]string{"CONTENT_DB": filepath.Join(t.TempDir(), "cms.db"), "API_ADDR": "127.0.0.1:0",
		"CLICKHOUSE_ADDR": "127.0.0.1:9440", "CLICKHOUSE_TLS_CA_FILE": filepath.Join(t.TempDir(), "missing.pem")}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var out bytes.Buffer
	if code := run(t.Context(), []string{"serve"}, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), "read the ClickHouse TLS CA file") {
		t.Errorf("exit %d, output %q: want a failure naming the CA file", code, out.String())
	}
}

func TestServeRefusesBadHistoryRules(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"HISTORY_MIN_USERS", "0", "-history-min-users (HISTORY_MIN_USERS) 0: want 1 or more"},
		{"HISTORY_MIN_USERS", "-3", "-history-min-users (HISTORY_MIN_USERS) -3: want 1 or more"},
		{"HISTORY_MIN_SOURCES", "-1", "-history-min-sources (HISTORY_MIN_SOURCES) -1: want 1 or more (0: as many as users)"},
		{"HISTORY_DAYS", "0", "-history-days (HISTORY_DAYS) 0: want 1 or more"},
	} {
		env := map[string]string{"CONTENT_DB": filepath.Join(t.TempDir(), "cms.db"), "API_ADDR": "127.0.0.1:0", tc.name: tc.value}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var out bytes.Buffer
		if code := run(t.Context(), []string{"serve"}, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s=%s: exit %d, output %q: want a failure saying %q", tc.name, tc.value, code, out.String(), tc.want)
		}
	}
}

func TestServeRefusesGraphQLLimitsOfNothing(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"GRAPHQL_MAX_COST", "0", "-graphql-max-cost (GRAPHQL_MAX_COST) 0: want 1 or more"},
		{"GRAPHQL_LIST_SIZE", "-1", "-graphql-list-size (GRAPHQL_LIST_SIZE) -1: want 1 or more"},
		{"GRAPHQL_MAX_ANSWER_BYTES", "0", "-graphql-max-answer-bytes (GRAPHQL_MAX_ANSWER_BYTES) 0: want 1 or more"},
		{"GRAPHQL_MAX_INTROSPECTION_DEPTH", "0", "-graphql-max-introspection-depth (GRAPHQL_MAX_INTROSPECTION_DEPTH) 0: want 1 or more"},
		{"LIVE_READ_PER_SECOND", "-1", "-live-read-per-second (LIVE_READ_PER_SECOND) -1: want 0 (every record) or more"},
	} {
		env := map[string]string{"CONTENT_DB": filepath.Join(t.TempDir(), "cms.db"), "API_ADDR": "127.0.0.1:0", tc.name: tc.value}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var out bytes.Buffer
		if code := run(t.Context(), []string{"serve"}, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s=%s: exit %d, output %q: want a failure saying %q", tc.name, tc.value, code, out.String(), tc.want)
		}
	}
}

func TestServeRefusesBadSearchSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"EMBEDDINGS_URL": "ftp://127.0.0.1/v1", "EMBEDDINGS_MODEL": "m"}, "-embeddings-url (EMBEDDINGS_URL): embeddings: URL \"ftp://127.0.0.1/v1\": scheme must be http or https"},
		{map[string]string{"EMBEDDINGS_URL": "http://127.0.0.1:1/v1"}, "-embeddings-model (EMBEDDINGS_MODEL) is required with -embeddings-url (EMBEDDINGS_URL)"},
		{map[string]string{"EMBEDDINGS_URL": "http://127.0.0.1:1/v1", "EMBEDDINGS_MODEL": "m", "EMBEDDINGS_MIN_SIMILARITY": "2"}, "-embeddings-min-similarity (EMBEDDINGS_MIN_SIMILARITY) 2: want -1 to 1"},
		{map[string]string{"WORDNET_DIR": filepath.Join(t.TempDir(), "none")}, "-wordnet-dir (WORDNET_DIR)"},
		{map[string]string{"ENCODER_DIR": filepath.Join(t.TempDir(), "none")}, "none/model.json"},
		{map[string]string{"ENCODER_DIR": corruptModel(t, "group1-shard3of7")}, "group1-shard3of7"},
		{map[string]string{"ENCODER_DIR": corruptModel(t, "vocab.json")}, "vocab.json"},
	} {
		env := map[string]string{"CONTENT_DB": filepath.Join(t.TempDir(), "cms.db"), "API_ADDR": "127.0.0.1:0"}
		maps.Copy(env, tc.env)
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var out bytes.Buffer
		if code := run(t.Context(), []string{"serve"}, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q: want a failure saying %q", tc.env, code, out.String(), tc.want)
		}
	}
}

// corruptModel copies the sentence encoder's model into a directory of the
// test with file cut in half.
func corruptModel(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	model, _ := encoder.Locate()
	entries, err := os.ReadDir(model)
	if err != nil {
		t.Fatalf("the sentence encoder's model (install it with deploy/install-encoder %s): %v", model, err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(model, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			raw = raw[:len(raw)/2]
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
