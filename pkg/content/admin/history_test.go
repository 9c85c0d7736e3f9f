package admin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHistoryCommands: what the commands change is attributed to the
// local user; api history lists a record's revisions, their difference
// and the audit log, and restores a record and the app.
func TestHistoryCommands(t *testing.T) {
	e := newEnv(t)
	e.seed()
	file := func(handlerName string) string {
		p := filepath.Join(t.TempDir(), "b.json")
		b := `{"handlers":[{"appId":"app-1","intentId":"Hi","name":"` + handlerName + `"}]}`
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e.must("import", file("first"))
	between := time.Now()
	e.must("import", file("second"))

	var revs []struct {
		Revision int64           `json:"revision"`
		Document json.RawMessage `json:"document"`
	}
	if err := json.Unmarshal([]byte(e.must("history", "revisions", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--json")), &revs); err != nil || len(revs) != 2 {
		t.Fatalf("revisions: %v %+v", err, revs)
	}
	diff := e.must("history", "diff", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--from", strconv.FormatInt(revs[1].Revision, 10), "--to", strconv.FormatInt(revs[0].Revision, 10))
	if !strings.Contains(diff, `name   "first"  "second"`) {
		t.Errorf("diff:\n%s", diff)
	}
	audit := e.must("history", "audit", "--app", "app-1", "--json")
	var entries []map[string]any
	if err := json.Unmarshal([]byte(audit), &entries); err != nil || len(entries) != 3 {
		t.Fatalf("audit: %v\n%s", err, audit)
	}
	if entries[0]["operation"] != "import" || entries[0]["local_user"] != localUser() || entries[0]["updated"] != 1.0 || entries[2]["operation"] != "app create" {
		t.Errorf("audit entries: %v", entries)
	}

	out := e.must("history", "restore", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--revision", strconv.FormatInt(revs[1].Revision, 10), "--if-revision", strconv.FormatInt(revs[0].Revision, 10))
	if !strings.Contains(out, "handler Hi restored at revision") {
		t.Errorf("restore: %s", out)
	}
	if r := e.run("history", "restore", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--revision", strconv.FormatInt(revs[1].Revision, 10), "--if-revision", strconv.FormatInt(revs[0].Revision, 10)); r.code != ExitFailure || !strings.Contains(r.stderr, "read it again") {
		t.Errorf("a stale restore: %d %s", r.code, r.stderr)
	}
	e.must("import", file("third"))
	out = e.must("history", "restore-app", "--app", "app-1", "--at", between.UTC().Format(time.RFC3339Nano))
	if !strings.Contains(out, "0 created, 1 updated, 0 deleted") {
		t.Errorf("restore-app: %s", out)
	}
	rec, err := e.store().Record(t.Context(), "app-1", "handler", "Hi")
	if err != nil || !strings.Contains(string(rec.Doc), `"first"`) {
		t.Errorf("after restore-app: %s %v", rec.Doc, err)
	}

	if out := e.must("history", "prune", "--older-than", "1h"); out != "pruned 0 revisions and 0 audit entries\n" {
		t.Errorf("prune of nothing old: %q", out)
	}
	if r := e.run("history", "prune", "--keep", "0"); r.code != ExitUsage {
		t.Errorf("prune --keep 0: exit %d", r.code)
	}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"history", "revisions", "--app", "app-1", "--kind", "widget", "--id", "Hi"}, ExitUsage, `--kind "widget"`},
		{[]string{"history", "revisions", "--kind", "handler", "--id", "Hi"}, ExitUsage, "--app is required"},
		{[]string{"history", "diff", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--from", "1"}, ExitUsage, "--from and --to are required"},
		{[]string{"history", "diff", "--app", "app-1", "--kind", "handler", "--id", "Hi", "--from", "0", "--to", "99999"}, ExitFailure, "has no revision"},
		{[]string{"history", "audit", "--app", "app-1", "--from", "yesterday"}, ExitUsage, "RFC 3339"},
		{[]string{"history", "audit", "--app", "app-9"}, ExitFailure, `app "app-9" not found`},
		{[]string{"history", "restore-app", "--app", "app-1", "--at", "2000-01-01T00:00:00Z"}, ExitFailure, "created later"},
	} {
		if r := e.run(c.args...); r.code != c.code || !strings.Contains(r.stderr, c.err) {
			t.Errorf("%q: exit %d, %s; want %d with %q", c.args, r.code, r.stderr, c.code, c.err)
		}
	}
}
