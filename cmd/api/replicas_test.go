package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devpostgres"
)

// TestReplicasShareOnePostgreSQL moves content and a token from SQLite to
// PostgreSQL with api export --tokens and api import, then runs two api
// processes on that database, as replicas behind a load balancer do: the
// moved token works, a change written through one replica shows on the
// other at once (notified; the time is logged), though each checks
// revisions only hourly, and a
// revoked token stops working on both and on an ingest process within the
// token cache's lifetime.
func TestReplicasShareOnePostgreSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := startPostgres(ctx, t)

	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api", "./cmd/ingest"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	brokerBin, err := devbroker.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	broker := devbroker.StartForTest(t, brokerBin)
	admin := func(db string, args ...string) string {
		t.Helper()
		return runAdmin(ctx, t, bin, db, args...)
	}
	// The content starts on SQLite, with a token issued there, and moves
	// to PostgreSQL as a deployment outgrowing one node does.
	lite := filepath.Join(dir, "cms.db")
	admin(lite, "import", "../../deploy/demo/content.yaml")
	token := admin(lite, "demo", "--quiet", "--management")
	moved := filepath.Join(dir, "everything.json")
	admin(lite, "export", "--tokens", "-o", moved)
	if out := admin(dsn, "import", "--tokens", moved); !strings.Contains(out, "tokens: 1 created") {
		t.Fatalf("import into PostgreSQL: %s", out)
	}

	const tokenTTL = 2 * time.Second
	start := func(name string, args []string, env ...string) string {
		t.Helper()
		port, err := devbroker.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(append(os.Environ(), "CONTENT_DB="+dsn, "TOKEN_CACHE_TTL="+tokenTTL.String(), "RATE_LIMIT_RPS=0"), env...)
		cmd.Env = append(cmd.Env, fmt.Sprintf("API_ADDR=127.0.0.1:%d", port), fmt.Sprintf("INGEST_ADDR=127.0.0.1:%d", port))
		startProcess(ctx, t, name, cmd, base+"/readyz")
		return base
	}
	var replicas [2]string
	for i := range replicas {
		replicas[i] = start(fmt.Sprintf("api replica %d", i), []string{bin, "serve"}, "CONTENT_REFRESH_INTERVAL=1h")
	}
	ingest := start("ingest", []string{filepath.Join(dir, "ingest")}, "KAFKA_BROKERS="+broker.Addr(), "EVENTS_TOPIC=replicas-events",
		"QUARANTINE_TOPIC=replicas-quarantine", "TOPIC_PARTITIONS=1")
	sendEvent := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, ingest+"/cms/app/events",
			strings.NewReader(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web-chat","platform":"web","sessionId":"s1","userId":"u1","selectedHandler":"LaunchRequest"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := sendEvent(); code != http.StatusOK {
		t.Fatalf("ingest on PostgreSQL with the moved token: %d", code)
	}
	var readAs func(replica, path, token string) (int, string)
	read := func(replica, path string) (int, string) { return readAs(replica, path, token) }
	readAs = func(replica, path, token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, replica+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Both replicas cache the list before the change.
	for _, r := range replicas {
		if code, body := read(r, "/cms/entity"); code != http.StatusOK || strings.Contains(body, "SHARED_ENTITY") {
			t.Fatalf("%s before the change: %d %s", r, code, body)
		}
	}

	graphQL := func(replica, query, want string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, replica+"/cms/graphql", strings.NewReader(`{"query":`+strconv.Quote(query)+`}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) || strings.Contains(string(body), `"errors"`) {
			t.Fatalf("%s through %s: %d %s", query, replica, resp.StatusCode, body)
		}
	}
	graphQL(replicas[0], `mutation { addEntity(entity: {entityId: "SHARED_ENTITY", displayName: "Shared"}) { entityId } }`, "SHARED_ENTITY")
	written := time.Now()
	// Only the notification can show it this side of the hourly check;
	// the bound is generous for a loaded machine, the figure logged.
	waitUntil(t, 30*time.Second, "the change on replica 1", func() bool {
		_, body := read(replicas[1], "/cms/entity")
		return strings.Contains(body, "SHARED_ENTITY")
	})
	t.Logf("figure: the change showed on the other replica after %v", time.Since(written).Round(time.Millisecond))

	publishingAcrossReplicas(t, replicas, graphQL, func(replica, path, tok string) string {
		if tok == "" {
			tok = token
		}
		_, body := readAs(replica, path, tok)
		return body
	}, admin(dsn, "token", "create", "--app", "demo-app", "--runtime", "--quiet"))

	// Revoked by another process: both api replicas and ingest refuse the
	// token once their cached lookups expire.
	admin(dsn, "token", "revoke", strings.Split(token, "_")[1])
	revoked := time.Now()
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the revocation on "+r, func() bool {
			code, _ := read(r, "/cms/app")
			return code == http.StatusUnauthorized
		})
	}
	waitUntil(t, 30*time.Second, "the revocation on ingest", func() bool { return sendEvent() == http.StatusUnauthorized })
	if took := time.Since(revoked); took > tokenTTL+2*time.Second {
		t.Errorf("the revocation took %v to reach every replica; want within the token cache TTL (%v)", took, tokenTTL)
	}
}

// pgDir is a directory the server's system user can reach.
func pgDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cms-pg-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func status(ctx context.Context, url, token string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeThroughAPostgreSQLOutage stops the database under a running api:
// through the outage grace, answers cached before keep coming, what was not
// cached gets 503 and the api stays in rotation; after it, readiness fails
// naming the database; all is well again once the database is back.
func TestServeThroughAPostgreSQLOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, err := devpostgres.Start(ctx, devpostgres.Options{Dir: pgDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	dsn := pg.DSN(pg.Database())
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	for _, args := range [][]string{{"import", "../../deploy/demo/content.yaml"}} {
		if out, err := exec.CommandContext(ctx, bin, append([]string{"-content-db", dsn}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("api %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "-content-db", dsn, "demo", "--quiet").Output()
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(out))
	port, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(bin, "serve")
	// The token lookup stays cached for the whole outage.
	const grace = 10 * time.Second
	cmd.Env = append(os.Environ(), "CONTENT_DB="+dsn, "API_ADDR="+base[len("http://"):], "TOKEN_CACHE_TTL=30s",
		"RATE_LIMIT_RPS=0", "CONTENT_OUTAGE_GRACE="+grace.String())
	var logs childproc.Output
	cmd.Stdout, cmd.Stderr = &logs, &logs
	proc, err := childproc.Start("api", cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := proc.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
			t.Errorf("api: %v\n%s", err, logs.String())
		}
	}()
	waitUntil(t, 30*time.Second, "api ready", func() bool { return status(ctx, base+"/readyz", "") == http.StatusOK })
	const cached, uncached = "/cms/handler/OpeningHours", "/cms/entity"
	if code := status(ctx, base+cached, token); code != http.StatusOK {
		t.Fatalf("before the outage: %d", code)
	}

	if code := status(ctx, base+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("readiness before the outage: %d", code)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for _, tc := range []struct {
		path string
		want int
	}{
		{cached, http.StatusOK},
		{uncached, http.StatusServiceUnavailable},
		{"/readyz", http.StatusOK}, // still in rotation, answering from its cache
	} {
		if code := status(ctx, base+tc.path, token); code != tc.want {
			t.Errorf("%s during the outage: %d, want %d", tc.path, code, tc.want)
		}
	}
	if took := time.Since(stopped); took > grace/2 {
		t.Fatalf("the checks within the grace took %v; the machine is too slow for this test's %v grace", took, grace)
	}
	waitUntil(t, grace+20*time.Second, "readiness failing after the grace", func() bool {
		return status(ctx, base+"/readyz", "") == http.StatusServiceUnavailable
	})
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "content_db") || strings.Contains(string(body), "postgres@") {
		t.Errorf("readiness body %q: want it to name the content database check, without the URL's user", body)
	}

	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "readiness back", func() bool { return status(ctx, base+"/readyz", "") == http.StatusOK })
	waitUntil(t, 10*time.Second, "uncached reads back", func() bool { return status(ctx, base+uncached, token) == http.StatusOK })
}

// startPostgres runs a private PostgreSQL server for the test and returns
// the DSN of its database. It stops in a cleanup, not a defer: processes
// stopped by cleanups registered later stop before the database does.
func startPostgres(ctx context.Context, t *testing.T) string {
	t.Helper()
	pg, err := devpostgres.Start(ctx, devpostgres.Options{Dir: pgDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	return pg.DSN(pg.Database())
}

// runAdmin runs an api admin command on db and returns its output.
func runAdmin(ctx context.Context, t *testing.T, bin, db string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-content-db", db}, args...)...).Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("api %v: %v\n%s", args, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// startProcess runs cmd with its output in logs, stops it with SIGTERM
// when the test ends, and waits until url answers 200.
func startProcess(ctx context.Context, t *testing.T, name string, cmd *exec.Cmd, url string) *childproc.Proc {
	t.Helper()
	logs := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	p, err := childproc.Start(name, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
			t.Errorf("%s: %v\n%s", name, err, logs.String())
		}
	})
	waitUntil(t, 30*time.Second, name+" answering", func() bool { return status(ctx, url, "") == http.StatusOK })
	return p
}

// publishingAcrossReplicas turns publishing on through one replica and
// writes two entities to the draft: both replicas show them to the
// management token, neither to a runtime's, until a publish through the
// other replica makes them live on both at once (only the notification
// can, the replicas checking revisions hourly). Every answer a runtime
// gets meanwhile holds both or neither. A rollback through the first
// takes them away again on both.
func publishingAcrossReplicas(t *testing.T, replicas [2]string, graphQL func(replica, query, want string), read func(replica, path, token string) string, runtime string) {
	t.Helper()
	graphQL(replicas[0], `mutation { setPublishing(on: true) { live } }`, `"live":1`)
	graphQL(replicas[0], `mutation { a: addEntity(entity: {entityId: "DRAFT_A"}) { entityId } b: addEntity(entity: {entityId: "DRAFT_B"}) { entityId } }`, "DRAFT_B")
	both := func(body string) bool { return strings.Contains(body, "DRAFT_A") && strings.Contains(body, "DRAFT_B") }
	neither := func(body string) bool {
		return !strings.Contains(body, "DRAFT_A") && !strings.Contains(body, "DRAFT_B")
	}
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the draft on "+r, func() bool { return both(read(r, "/cms/entity", "")) })
		if body := read(r, "/cms/entity", runtime); !neither(body) || !strings.Contains(body, "SHARED_ENTITY") {
			t.Fatalf("a runtime on %s reads the draft, or not the live version: %s", r, body)
		}
	}
	// A runtime reads on both replicas while the publish goes through.
	stop := make(chan struct{})
	mixed := make(chan string, 1)
	var readers sync.WaitGroup
	for _, r := range replicas {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if body := read(r, "/cms/entity", runtime); !both(body) && !neither(body) {
					select {
					case mixed <- body:
					default:
					}
				}
			}
		})
	}
	published := time.Now()
	graphQL(replicas[1], `mutation { publish { published version { number } } }`, `"number":2`)
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the publish on "+r, func() bool { return both(read(r, "/cms/entity", runtime)) })
	}
	t.Logf("figure: a publish was live on both replicas after %v", time.Since(published).Round(time.Millisecond))
	close(stop)
	readers.Wait()
	select {
	case body := <-mixed:
		t.Errorf("a runtime read half of a publish: %s", body)
	default:
	}
	graphQL(replicas[0], `mutation { rollback(version: 1) { number live } }`, `"live":true`)
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the rollback on "+r, func() bool { return neither(read(r, "/cms/entity", runtime)) })
		if !both(read(r, "/cms/entity", "")) {
			t.Errorf("a rollback changed the draft on %s", r)
		}
	}
}
