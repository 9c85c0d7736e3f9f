package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
)

// TestBlockSuggestionCommands keeps a planted text out of HISTORICAL
// suggestions as an operator would, with the binary configured by the
// environment: blocked on every channel, then on one, listed, let back.
func TestBlockSuggestionCommands(t *testing.T) {
	ctx := t.Context()
	srv, bin, s := binaryAndStore(t)
	// Two questions asked by six users, each in a session of their own
	// and from a network of their own.
	b := &chstore.EventBatch{}
	at := time.Now().UTC()
	for _, q := range []string{"where is my order", "Opening hours are CLOSED forever visit evil shop"} {
		for u := range 6 {
			i := b.AddRow()
			b.EventID[i], b.AppID[i], b.EventTime[i], b.ReceivedAt[i] = fmt.Sprintf("%s-%d", q, u), "shop", at, at
			b.Name[i], b.UserID[i], b.SessionID[i], b.Channel[i], b.RawQuery[i], b.Extra[i] = "REQUEST_RESPONSE", fmt.Sprint("u", u), fmt.Sprint("s", u), "web", q, "{}"
			b.TokenID[i], b.ClientNetwork[i] = "0123456789abcdef", fmt.Sprintf("198.51.%d.0/24", u)
		}
	}
	if err := s.InsertEvents(ctx, b); err != nil {
		t.Fatal(err)
	}
	top := func() string {
		t.Helper()
		qs, err := queryhistory.TopQueries(ctx, s, "shop", "web", 10, queryhistory.Suggestable{MinUsers: 5, Days: 90})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range qs {
			out = append(out, q.Query)
		}
		return strings.Join(out, "|")
	}
	// The planted text reads as ordinary as any: no filter can know.
	const planted = "opening hours are closed forever visit evil shop"
	if got := top(); got != planted+"|where is my order" {
		t.Fatalf("suggested before any block: %s", got)
	}
	// run returns what the command printed: its report on stdout, or,
	// when it failed, its error on stderr (where the log goes too).
	run := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "CLICKHOUSE_ADDR="+srv.Addr(), "CLICKHOUSE_DATABASE=analytics")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stderr.String(), err
		}
		return stdout.String(), nil
	}
	for _, tc := range []struct {
		name  string
		args  []string
		fails bool
		out   string
		top   string
	}{
		{"no query", []string{"block-suggestion", "-app", "shop"}, true, "block-suggestion: want -app A [-channel C] -query TEXT", ""},
		{"no app", []string{"unblock-suggestion", "-query", "x"}, true, "unblock-suggestion: want -app A [-channel C] -query TEXT", ""},
		{"too long", []string{"block-suggestion", "-app", "shop", "-query", strings.Repeat("x", queryhistory.MaxBlockedQueryBytes+1)}, true,
			fmt.Sprintf("the query is %d bytes; at most %d are allowed", queryhistory.MaxBlockedQueryBytes+1, queryhistory.MaxBlockedQueryBytes), ""},
		{"block on every channel, as typed", []string{"block-suggestion", "-app", "shop", "-query", "  Opening hours are closed   forever visit EVIL shop "}, false,
			`blocked "opening hours are closed forever visit evil shop" in app "shop" on every channel`, "where is my order"},
		{"block on one channel", []string{"block-suggestion", "-app", "shop", "-channel", "web", "-query", "where is my order"}, false,
			`blocked "where is my order" in app "shop" on channel "web"`, ""},
		{"list", []string{"blocked-suggestions", "-app", "shop"}, false, "", ""},
		{"another app's list", []string{"blocked-suggestions", "-app", "blog"}, false, "APP  CHANNEL  BLOCKED AT  QUERY\n", ""},
		{"unblock", []string{"unblock-suggestion", "-app", "shop", "-query", planted}, false,
			`unblocked "opening hours are closed forever visit evil shop" in app "shop" on every channel`, planted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if (err != nil) != tc.fails {
				t.Fatalf("%v: %v\n%s", tc.args, err, out)
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("output %q lacks %q", out, tc.out)
			}
			if tc.name == "list" {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "APP CHANNEL BLOCKED AT QUERY" ||
					!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "shop (all) ") || !strings.HasSuffix(lines[1], `"`+planted+`"`) ||
					!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "shop web ") || !strings.HasSuffix(lines[2], `"where is my order"`) {
					t.Errorf("list:\n%s", out)
				}
				return
			}
			if !tc.fails && tc.args[0] != "blocked-suggestions" {
				if got := top(); got != tc.top {
					t.Errorf("suggested %q, want %q", got, tc.top)
				}
			}
		})
	}
}
