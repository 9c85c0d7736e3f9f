package containers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devdocker"
)

// deployment is a compose project on the engine: its files, layered as -f
// flags, and the published ports it was given.
type deployment struct {
	files []string
	// ports are the host ports of compose.yaml's port variables; free
	// ones, so that a run does not depend on what the host serves.
	ports map[string]int
	// env holds more variables of the files, NAME=VALUE.
	env []string
}

// portVars are compose.yaml's variables of published ports.
var portVars = []string{"GATEWAY_PORT", "STATUS_PORT", "PROMETHEUS_PORT", "ALERTMANAGER_PORT", "GRAFANA_PORT"}

func newDeployment(t *testing.T, files ...string) *deployment {
	t.Helper()
	free, err := childproc.FreePorts(len(portVars))
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{files: files, ports: map[string]int{}}
	for i, v := range portVars {
		d.ports[v] = free[i]
	}
	return d
}

func (d *deployment) command(ctx context.Context, args ...string) *exec.Cmd {
	full := []string{"compose"}
	for _, f := range d.files {
		full = append(full, "-f", f)
	}
	cmd := engine.Command(ctx, append(full, args...)...)
	for v, p := range d.ports {
		cmd.Env = append(cmd.Env, v+"="+strconv.Itoa(p))
	}
	cmd.Env = append(cmd.Env, d.env...)
	return cmd
}

// compose runs docker compose with the project's files and returns its
// standard output, failing t with all it printed.
func (d *deployment) compose(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (d *deployment) run(ctx context.Context, args ...string) (string, error) {
	return devdocker.Output(d.command(ctx, args...))
}

// up starts the project and waits for every service to be healthy (or,
// for the one-shot ones, to have completed); on failure it logs what ran.
func (d *deployment) up(ctx context.Context, t *testing.T) {
	t.Helper()
	start := time.Now()
	if _, err := d.run(ctx, "up", "--detach", "--wait", "--wait-timeout", "300"); err != nil {
		d.logState(t)
		t.Fatal(err)
	}
	t.Logf("up and healthy in %v", time.Since(start).Round(time.Second))
}

// down removes the project: containers, networks and volumes.
func (d *deployment) down(ctx context.Context, t *testing.T) {
	t.Helper()
	d.compose(ctx, t, "down", "--volumes", "--timeout", "30")
}

// logState logs the containers' states and the end of their logs.
func (d *deployment) logState(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ps, _ := d.run(ctx, "ps", "--all")
	logs, _ := d.run(ctx, "logs", "--tail", "40", "--no-color")
	t.Logf("containers:\n%s\nlogs:\n%s", ps, tail(logs, 20000))
}

// container is a line of docker compose ps --format json.
type container struct {
	ID         string
	Service    string
	State      string
	Health     string
	ExitCode   int
	Publishers []struct {
		URL           string
		PublishedPort int
	}
}

func (d *deployment) containers(ctx context.Context, t *testing.T) map[string]container {
	t.Helper()
	out := d.compose(ctx, t, "ps", "--all", "--format", "json")
	cs := map[string]container{}
	for _, l := range lines(out) {
		var c container
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("docker compose ps: %v: %s", err, l)
		}
		cs[c.Service] = c
	}
	return cs
}

// clickhouse runs a query in the clickhouse service with the credentials
// of its environment, as its health check does, and returns the answer.
func (d *deployment) clickhouse(ctx context.Context, t *testing.T, service, query string) string {
	t.Helper()
	out := d.compose(ctx, t, "exec", "-T", service, "bash", "-c",
		`exec clickhouse-client --user "${CLICKHOUSE_USER:-default}" --password "${CLICKHOUSE_PASSWORD:-}" --query "$1"`, "query", query)
	return strings.TrimSpace(out)
}

// demoToken is the newest token the seed service printed.
func (d *deployment) demoToken(ctx context.Context, t *testing.T) string {
	t.Helper()
	var token string
	for _, l := range lines(d.compose(ctx, t, "logs", "--no-log-prefix", "--no-color", "seed")) {
		if strings.HasPrefix(l, "cms_") {
			token = l
		}
	}
	if token == "" {
		t.Fatal("the seed service printed no token")
	}
	return token
}

// manifest is what deploy/runtime/runtime.js wrote.
type manifest struct {
	SessionID string   `json:"sessionId"`
	Failures  []string `json:"failures"`
	Reads     *struct {
		Handlers  []string `json:"handlers"`
		Handler   string   `json:"handler"`
		Documents int      `json:"documents"`
		FAQs      int      `json:"faqs"`
	} `json:"reads"`
	Puts []struct {
		Turn   string `json:"turn"`
		Status int    `json:"status"`
		Answer struct {
			Accepted int `json:"accepted"`
			Rejected int `json:"rejected"`
		} `json:"answer"`
		Events []json.RawMessage `json:"events"`
	} `json:"puts"`
}

// runtime runs the reference client's runtime against the gateway: it
// reads the app's content and plays its conversation. It returns the
// manifest and how many events ingest accepted and rejected.
func runtime(ctx context.Context, t *testing.T, gateway, token string) (m manifest, accepted, rejected int) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: run `go run ./dev/test` (it installs Debian's nodejs and npm): %v", err)
	}
	dir := filepath.Join(repoRoot, "deploy", "runtime")
	path := filepath.Join(t.TempDir(), "manifest.json")
	cmd := exec.CommandContext(ctx, node, "runtime.js", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"STUDIO_TOKEN="+token,
		"STUDIO_APP_ID=demo-app",
		"STUDIO_BASE_URL=http://"+gateway,
		"STUDIO_READ_CONTENT=1",
		"STUDIO_ORG_TOKEN=",
		"AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE=1",
	)
	cmd.WaitDelay = 5 * time.Second
	out, runErr := cmd.CombinedOutput()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("node runtime.js wrote no manifest (%v): %v\n%s", runErr, err, out)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if runErr != nil || len(m.Failures) > 0 {
		t.Fatalf("node runtime.js: %v, failures %q\n%s", runErr, m.Failures, out)
	}
	if len(m.Puts) == 0 {
		t.Fatal("the runtime made no PUT")
	}
	for i, p := range m.Puts {
		if p.Status != http.StatusOK {
			t.Errorf("PUT %d (turn %s): status %d", i, p.Turn, p.Status)
		}
		if p.Answer.Accepted+p.Answer.Rejected != len(p.Events) {
			t.Errorf("PUT %d (turn %s): %d accepted and %d rejected of %d events", i, p.Turn, p.Answer.Accepted, p.Answer.Rejected, len(p.Events))
		}
		accepted += p.Answer.Accepted
		rejected += p.Answer.Rejected
	}
	return m, accepted, rejected
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// getJSON decodes the JSON answer of a GET of url into v and returns the
// status.
func getJSON(ctx context.Context, t *testing.T, url string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if v != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, tail(string(b), 500))
		}
	}
	return res.StatusCode
}

// sessionRows counts the rows of a session in a table.
func (d *deployment) sessionRows(ctx context.Context, t *testing.T, service, table, session string) (rows, unique int) {
	t.Helper()
	out := d.clickhouse(ctx, t, service, fmt.Sprintf(
		"SELECT count(), uniqExact(event_id) FROM %s WHERE app_id = 'demo-app' AND session_id = '%s'", table, session))
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("count rows: %q", out)
	}
	rows, _ = strconv.Atoi(f[0])
	unique, _ = strconv.Atoi(f[1])
	return rows, unique
}

// ourServices run our image as long-lived servers.
var ourServices = []string{"ingest", "consumer", "api", "gateway"}

// checkHardened checks that a service's process runs as the image's
// nonroot user (65532) on a read-only root file system with no
// capabilities, reading the process's status on the host.
func checkHardened(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	out := strings.Fields(docker(ctx, t, "inspect", "--format",
		"{{.State.Pid}} {{.HostConfig.ReadonlyRootfs}} {{.Config.User}}", id))
	if len(out) != 3 {
		t.Fatalf("docker inspect %s: %q", id, out)
	}
	if out[1] != "true" || out[2] != "nonroot:nonroot" {
		t.Errorf("read-only root %s, user %q; want true and nonroot:nonroot", out[1], out[2])
	}
	status, err := os.ReadFile("/proc/" + out[0] + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "Uid:", "Gid:":
			if slices.ContainsFunc(f[1:], func(id string) bool { return id != "65532" }) {
				t.Errorf("process %s %s, want 65532 throughout", out[0], l)
			}
		case "CapEff:", "CapPrm:":
			if f[1] != "0000000000000000" {
				t.Errorf("process %s %s, want no capabilities", out[0], l)
			}
		}
	}
}
