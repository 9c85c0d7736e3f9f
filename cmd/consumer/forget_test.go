package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// TestForgetUserCommand runs "consumer forget-user" as an operator would,
// configured by the environment: refused without a user, then a dry run,
// then for real, then again with nothing left.
func TestForgetUserCommand(t *testing.T) {
	ctx := t.Context()
	srv, bin, s := binaryAndStore(t)
	at := insertAnnAndBob(t, s)
	if err := s.InsertQuarantine(ctx, []chstore.QuarantineRow{{EventID: "q1", AppID: "shop", ReceivedAt: at, Reason: "r", Errors: "[]",
		Event: `{"userId":"ann"}`}}); err != nil {
		t.Fatal(err)
	}
	events := func(user string) uint64 {
		t.Helper()
		var n uint64
		if err := s.Conn().QueryRow(ctx, "SELECT count() FROM analytics.events WHERE user_id = ?", user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	for _, tc := range []struct {
		name    string
		args    []string
		fails   bool
		want    []string
		annLeft uint64
	}{
		{"no user", []string{"-app", "shop"}, true, []string{"want -app A -user U"}, 2},
		{"dry run", []string{"-app", "shop", "-user", "ann", "-dry-run"}, false, []string{
			`user "ann" of app "shop": 1 sessions, 1 queries only they asked, 1 quarantined events`,
			"events           2 rows to delete (dry run: nothing deleted)",
			"query_counts_daily 1 rows to delete",
		}, 2},
		{"forget", []string{"-app", "shop", "-user", "ann", "-timeout", "1m"}, false, []string{
			"events           2 rows deleted", "quarantine       1 rows deleted", "sessions         1 rows deleted",
			"user_queries     2 rows deleted", "query_counts_daily 1 rows deleted",
		}, 0},
		{"again", []string{"-app", "shop", "-user", "ann"}, false, []string{"0 sessions", "no rows to delete"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin, append([]string{"forget-user"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "CLICKHOUSE_ADDR="+srv.Addr(), "CLICKHOUSE_DATABASE=analytics")
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fails {
				t.Fatalf("forget-user %v: %v\n%s", tc.args, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if n := events("ann"); n != tc.annLeft {
				t.Errorf("%d events of ann left, want %d", n, tc.annLeft)
			}
			if n := events("bob"); n != 1 {
				t.Errorf("%d events of bob left, want 1", n)
			}
		})
	}
}

// TestForgetUserCommandAfterEventsExpired forgets a user whose events
// retention has dropped already (their partitions, as an operator drops
// them on servers without TTL): the queries only they asked and their
// sessions go from the tables that outlived the events.
func TestForgetUserCommandAfterEventsExpired(t *testing.T) {
	ctx := t.Context()
	srv, bin, s := binaryAndStore(t)
	insertAnnAndBob(t, s)
	column := func(sql string) string {
		t.Helper()
		rows, err := s.Conn().Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return fmt.Sprint(out)
	}
	// Retention drops the events first.
	parts := column("SELECT DISTINCT partition FROM system.parts WHERE database = 'analytics' AND table = 'events' AND active")
	for _, p := range regexp.MustCompile(`\d+`).FindAllString(parts, -1) {
		if err := s.Conn().Exec(ctx, "ALTER TABLE analytics.events DROP PARTITION "+p); err != nil {
			t.Fatal(err)
		}
	}
	if got := column("SELECT toString(count()) FROM analytics.events"); got != "[0]" {
		t.Fatalf("events left: %s", got)
	}
	queries := "SELECT DISTINCT query FROM analytics.query_counts WHERE app_id = 'shop' ORDER BY query"
	sessions := "SELECT DISTINCT session_id FROM analytics.sessions WHERE app_id = 'shop' ORDER BY session_id"
	if got := column(queries); got != "[my secret plan where is my order]" {
		t.Fatalf("query counts before: %s", got)
	}
	cmd := exec.CommandContext(ctx, bin, "forget-user", "-app", "shop", "-user", "ann", "-timeout", "1m")
	cmd.Env = append(os.Environ(), "CLICKHOUSE_ADDR="+srv.Addr(), "CLICKHOUSE_DATABASE=analytics")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("forget-user: %v\n%s", err, out)
	}
	if got := column(queries); got != "[where is my order]" {
		t.Errorf("query counts left: %s, want only the one bob asked too\n%s", got, out)
	}
	if got := column(sessions); got != "[s-b]" {
		t.Errorf("sessions left: %s, want bob's\n%s", got, out)
	}
}

// binaryAndStore builds the consumer binary and migrates an analytics
// database on a ClickHouse server of the test's own.
func binaryAndStore(t *testing.T) (*devclickhouse.Server, string, *chstore.Store) {
	t.Helper()
	srv := devclickhouse.StartForTest(t)
	ctx := t.Context()
	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, Database: "analytics"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, bin, s
}

// insertAnnAndBob stores ann's two questions, one of them hers alone,
// and bob's one, in app shop, and returns when they were asked.
func insertAnnAndBob(t *testing.T, s *chstore.Store) time.Time {
	t.Helper()
	b := &chstore.EventBatch{}
	at := time.Now().UTC()
	for _, e := range []struct{ id, user, session, query string }{
		{"a1", "ann", "s-a", "where is my order"},
		{"a2", "ann", "s-a", "my secret plan"},
		{"b1", "bob", "s-b", "where is my order"},
	} {
		i := b.AddRow()
		b.EventID[i], b.AppID[i], b.EventTime[i], b.ReceivedAt[i] = e.id, "shop", at, at
		b.Name[i], b.UserID[i], b.SessionID[i], b.Channel[i], b.RawQuery[i], b.Extra[i] = "REQUEST_RESPONSE", e.user, e.session, "web", e.query, "{}"
	}
	if err := s.InsertEvents(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	return at
}
