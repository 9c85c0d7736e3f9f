package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/pkg/content/contentdb"
)

// TestRestoreUndoesACatalogueRefresh: two api replicas share PostgreSQL,
// and runtimes read an entity of 5,000 values from both. An automated
// refresh replaces them with 3, through one replica; the app is restored
// to the minute before, through the other; runtimes read the 5,000 again
// on both, and the audit log tells who did what.
func TestRestoreUndoesACatalogueRefresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := startPostgres(ctx, t)
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	admin := func(args ...string) string { t.Helper(); return runAdmin(ctx, t, bin, dsn, args...) }
	admin("import", "../../deploy/demo/content.yaml")
	var values []string
	for i := range 5000 {
		values = append(values, fmt.Sprintf(`{"name":"product %d","synonyms":["item %d"]}`, i, i))
	}
	catalogue := filepath.Join(dir, "catalogue.json")
	if err := os.WriteFile(catalogue, []byte(`{"entities":[{"appId":"demo-app","entityId":"CATALOGUE","values":[`+strings.Join(values, ",")+`]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	admin("import", catalogue)
	runtime := admin("demo", "--quiet")
	manager := admin("demo", "--quiet", "--management")

	var replicas [2]string
	for i := range replicas {
		port, err := devbroker.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "CONTENT_DB="+dsn, "RATE_LIMIT_RPS=0", "CONTENT_REFRESH_INTERVAL=1h", fmt.Sprintf("API_ADDR=127.0.0.1:%d", port))
		startProcess(ctx, t, fmt.Sprintf("api replica %d", i), cmd, replicas[i]+"/readyz")
	}
	valuesOn := func(replica string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, replica+"/cms/entity/CATALOGUE", nil)
		req.Header.Set("Authorization", "Bearer "+runtime)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var got struct {
			Entity struct {
				Values []json.RawMessage `json:"values"`
			} `json:"entity"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
			return -1
		}
		return len(got.Entity.Values)
	}
	graphql := func(replica, query string, vars map[string]any) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, replica+"/cms/graphql", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+manager)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "catalogue-sync/1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"errors"`) {
			t.Fatalf("%s: %d %s", query, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, r := range replicas {
		if n := valuesOn(r); n != 5000 {
			t.Fatalf("%s before the refresh: %d values", r, n)
		}
	}
	before := time.Now()

	graphql(replicas[0], `mutation { replaceEntityValues(entityId: "CATALOGUE", values: [{name: "a"}, {name: "b"}, {name: "c"}]) { revision } }`, nil)
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the refresh on "+r, func() bool { return valuesOn(r) == 3 })
	}
	out := graphql(replicas[1], `mutation($at: String!) { restoreApp(at: $at) { created updated deleted unchanged } }`,
		map[string]any{"at": before.UTC().Format(time.RFC3339Nano)})
	if !strings.Contains(out, `"updated":1`) || !strings.Contains(out, `"deleted":0`) || !strings.Contains(out, `"created":0`) {
		t.Errorf("restoreApp: %s", out)
	}
	restored := time.Now()
	for _, r := range replicas {
		waitUntil(t, 30*time.Second, "the restore on "+r, func() bool { return valuesOn(r) == 5000 })
	}
	t.Logf("figure: both replicas served the 5,000 values again %v after the restore", time.Since(restored).Round(time.Millisecond))

	log := graphql(replicas[0], `{ auditLog(first: 3) { operation userAgent tokenId localUser } }`, nil)
	var got struct {
		Data struct {
			AuditLog []map[string]string `json:"auditLog"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(log), &got); err != nil || len(got.Data.AuditLog) < 2 {
		t.Fatalf("auditLog: %s", log)
	}
	if e := got.Data.AuditLog; e[0]["operation"] != "restoreApp" || e[1]["operation"] != "replaceEntityValues" || e[0]["userAgent"] != "catalogue-sync/1.0" || e[0]["tokenId"] == "" {
		t.Errorf("auditLog: %s", log)
	}
}

// TestKilledImportLeavesNoChangeWithoutItsRevision kills the api with
// SIGKILL in the middle of a large import, on SQLite and on PostgreSQL:
// neither records nor revisions of it are there. The import run again to
// its end leaves every record with its revision.
func TestKilledImportLeavesNoChangeWithoutItsRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	var faqs []string
	for i := range 100_000 {
		faqs = append(faqs, fmt.Sprintf(`{"appId":"big","id":"f%d","questions":["question %d?"],"answer":"answer %d"}`, i, i, i))
	}
	big := filepath.Join(dir, "big.json")
	err := os.WriteFile(big, []byte(`{"organizations":[{"id":"o","name":"O"}],"apps":[{"appId":"big","organizationId":"o","name":"Big"}],"faqs":[`+strings.Join(faqs, ",")+`]}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []struct {
		name string
		dsn  func() string
		// writing reports whether the import is writing its records.
		writing func(dsn string) bool
	}{
		{"sqlite", func() string { return filepath.Join(dir, "cms.db") }, func(dsn string) bool {
			// Pages of an uncommitted transaction spill into the WAL.
			fi, err := os.Stat(dsn + "-wal")
			return err == nil && fi.Size() > 8<<20
		}},
		{"postgres", func() string { return startPostgres(ctx, t) }, func(dsn string) bool {
			s, err := contentdb.OpenDB(ctx, dsn)
			if err != nil {
				return false
			}
			defer s.Close()
			var n int
			err = s.SQL().SQL().QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'INSERT INTO records%'`).Scan(&n)
			return err == nil && n > 0
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			dsn := engine.dsn()
			runAdmin(ctx, t, bin, dsn, "migrate")
			cmd := exec.CommandContext(ctx, bin, "-content-db", dsn, "import", big)
			var logs childproc.Output
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, time.Minute, "the import writing records", func() bool { return engine.writing(dsn) })
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if strings.Contains(logs.String(), "imported") {
				t.Fatalf("the import finished before it was killed: %s", logs.String())
			}
			records, revisions, orphans := counts(ctx, t, dsn)
			if records != 0 || revisions != 0 || orphans != 0 {
				t.Errorf("after the kill: %d records, %d revisions, %d records without theirs; want neither", records, revisions, orphans)
			}
			runAdmin(ctx, t, bin, dsn, "import", big)
			records, revisions, orphans = counts(ctx, t, dsn)
			if records != 100_000 || revisions != 100_000 || orphans != 0 {
				t.Errorf("after the import: %d records, %d revisions, %d records without theirs; want 100,000 each with its revision", records, revisions, orphans)
			}
		})
	}
}

// counts reads how many records and record revisions the database holds,
// and how many records have no revision of their current state.
func counts(ctx context.Context, t *testing.T, dsn string) (records, revisions, orphans int) {
	t.Helper()
	s, err := contentdb.OpenDB(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.SQL().SQL()
	for _, q := range []struct {
		dest  *int
		query string
	}{
		{&records, `SELECT count(*) FROM records`},
		{&revisions, `SELECT count(*) FROM revisions WHERE kind <> 'app'`},
		{&orphans, `SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM revisions v
			WHERE v.app_id = r.app_id AND v.kind = r.kind AND v.id = r.id AND v.revision = r.revision AND v.doc = r.doc)`},
	} {
		if err := db.QueryRowContext(ctx, q.query).Scan(q.dest); err != nil {
			t.Fatal(err)
		}
	}
	return records, revisions, orphans
}
