package containers_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterServers are compose.production.yaml's ClickHouse servers, by shard.
var clusterServers = [][]string{{"clickhouse-s1r1", "clickhouse-s1r2"}, {"clickhouse-s2r1", "clickhouse-s2r2"}}

// TestProductionCompose brings up compose.production.yaml over
// compose.yaml, with the secrets made by the commands of
// deploy/compose/secrets/README.md: Kafka over TLS with SASL, a ClickHouse
// cluster of two shards of two replicas reached over TLS, the schema
// applied by the migrate service. The runtime's events land in the
// cluster, each once, the replicas of a shard agree, and Prometheus
// scrapes every service.
func TestProductionCompose(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	secrets := makeSecrets(ctx, t)
	d := newDeployment(t, "../compose/compose.yaml", "../compose/compose.production.yaml",
		"testdata/compose.standins.yaml", "testdata/compose.production.standins.yaml")
	d.env = append(d.env, "CMS_SECRETS_DIR="+secrets)
	downed := false
	t.Cleanup(func() {
		if t.Failed() {
			d.logState(t)
		}
		if !downed {
			d.down(context.Background(), t)
		}
	})
	d.up(ctx, t)

	t.Run("every service healthy, the one-shots completed", func(t *testing.T) {
		cs := d.containers(ctx, t)
		running := []string{"kafka", "clickhouse-keeper", "ingest", "consumer", "api", "gateway", "prometheus", "alertmanager"}
		for _, shard := range clusterServers {
			running = append(running, shard...)
		}
		for _, s := range running {
			if c := cs[s]; c.State != "running" || c.Health != "healthy" {
				t.Errorf("%s: %s, %q; want running and healthy", s, c.State, c.Health)
			}
		}
		for _, s := range []string{"seed-content", "seed", "migrate"} {
			if c := cs[s]; c.State != "exited" || c.ExitCode != 0 {
				t.Errorf("%s: %s with code %d; want exited with 0", s, c.State, c.ExitCode)
			}
		}
		if _, ok := cs["clickhouse"]; ok {
			t.Error("the single ClickHouse server ran; the production variant leaves it out")
		}
		checkPublished(t, cs)
		for _, s := range ourServices {
			t.Run(s, func(t *testing.T) { checkHardened(ctx, t, cs[s].ID) })
		}
	})

	t.Run("the runtime's events land in the cluster", func(t *testing.T) {
		m, accepted, rejected := runtime(ctx, t, "127.0.0.1:"+strconv.Itoa(d.ports["GATEWAY_PORT"]), d.demoToken(ctx, t))
		if rejected != 0 {
			t.Errorf("ingest rejected %d events", rejected)
		}
		// Through the Distributed table, which reads every shard.
		waitRows(ctx, t, d, clusterServers[0][0], m.SessionID, accepted)
		total := 0
		for _, shard := range clusterServers {
			var counts []int
			for _, server := range shard {
				rows, _ := d.sessionRows(ctx, t, server, "events_local", m.SessionID)
				counts = append(counts, rows)
			}
			// Inserts return once every replica has the rows.
			if counts[0] != counts[1] {
				t.Errorf("replicas %v hold %v rows of the session; want the same", shard, counts)
			}
			total += counts[0]
		}
		if total != accepted {
			t.Errorf("the shards hold %d rows of the session, want %d", total, accepted)
		}
	})

	t.Run("Prometheus scrapes every service and loads the rules", func(t *testing.T) {
		checkPrometheus(ctx, t, "http://127.0.0.1:"+strconv.Itoa(d.ports["PROMETHEUS_PORT"]), []string{"api", "consumer", "gateway", "ingest"})
	})

	t.Run("down leaves nothing behind", func(t *testing.T) {
		d.down(ctx, t)
		downed = true
		checkNothingLeft(ctx, t)
	})
}

// makeSecrets runs the commands of deploy/compose/secrets/README.md, as
// written, in a directory of the test's, and returns the secrets directory
// they filled.
func makeSecrets(ctx context.Context, t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose/secrets/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(b)
	if block == nil {
		t.Fatal("deploy/compose/secrets/README.md has no sh block")
	}
	root := t.TempDir()
	secrets := filepath.Join(root, "deploy/compose/secrets")
	if err := os.MkdirAll(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	// The block starts from the repository root, as the README says.
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", string(block[1]))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the commands of deploy/compose/secrets/README.md: %v\n%s", err, out)
	}
	if !strings.Contains(string(block[1]), "cd deploy/compose/secrets") {
		t.Fatal("the README's commands no longer start in deploy/compose/secrets; the test runs them there")
	}
	return secrets
}
