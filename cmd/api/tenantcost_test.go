package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
)

// The memory limit the api of TestOneTenantCannotTakeTheOthersShare runs
// under, and what it must stay within.
const tenantCostMemLimit = 512 << 20

// TestOneTenantCannotTakeTheOthersShare is two attacks made with nothing
// but an app's public runtime token, against a real api holding two
// organizations' apps, while the other organization's runtime keeps
// reading and searching:
//
//   - GraphQL: sixteen connections at once send a 6.6 KB query of 240
//     aliases of every handler's document (11 MB answered before, which
//     took the api past its memory limit);
//   - ranking: six connections send unique questions of 1,000 characters
//     (each about 33 ms of CPU, ranked first come first served before).
//
// The api stays under its memory limit and the other tenant's p99 stays
// within twice its quiet value.
func TestOneTenantCannotTakeTheOthersShare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api")
	db := filepath.Join(dir, "content.db")
	admin := func(args ...string) string {
		t.Helper()
		return runAdmin(ctx, t, bin, db, args...)
	}
	admin("import", "../../deploy/demo/content.yaml")
	// The other organization's app: the same content, its own IDs.
	demo, err := os.ReadFile("../../deploy/demo/content.yaml")
	if err != nil {
		t.Fatal(err)
	}
	other := strings.NewReplacer("demo-org", "other-org", "demo-app", "other-app", "key: demo-", "key: other-").Replace(string(demo))
	otherFile := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(otherFile, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	admin("import", otherFile)
	// Two runtime tokens of the demo app, one for each attack, so that the
	// second does not begin with the first's rate spent.
	attackers := []string{admin("demo", "--quiet"), admin("token", "create", "--app", "demo-app", "--quiet")}
	victim := admin("token", "create", "--app", "other-app", "--quiet")

	port, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "API_ADDR="+base[len("http://"):], "CONTENT_DB="+db,
		fmt.Sprintf("GOMEMLIMIT=%dMiB", tenantCostMemLimit>>20))
	api := startProcess(ctx, t, "api", cmd, base+"/healthz")

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(ctx context.Context, method, path, token, body string) (int, int, error) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, r)
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, int(n), err
	}
	// Both apps' content embedded, so that searches rank by meaning.
	for _, tok := range []string{attackers[0], victim} {
		waitUntil(t, 3*time.Minute, "a search ranked by meaning", func() bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/cms/search?question=opening+hours", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK && resp.Header.Get("X-Retrieval") == "hybrid"
		})
	}

	// The other tenant's runtime: one read and one search after another,
	// for as long in each phase.
	const phase = 3 * time.Second
	victimPaths := map[string]string{
		"REST read": "/cms/handler/OpeningHours",
		"search":    "/cms/search?question=can+i+borrow+a+bike+for+the+weekend",
	}
	// measure reads and searches as the other tenant's runtime does, one
	// request after another, for a while, and returns the p99 of each.
	measure := func(phase string, d time.Duration) map[string]time.Duration {
		t.Helper()
		took := map[string][]time.Duration{}
		for end := time.Now().Add(d); time.Now().Before(end); {
			for what, path := range victimPaths {
				start := time.Now()
				status, _, err := do(ctx, http.MethodGet, path, victim, "")
				if err != nil || status != http.StatusOK {
					t.Fatalf("%s: the other tenant's %s: %d %v", phase, what, status, err)
				}
				took[what] = append(took[what], time.Since(start))
			}
			time.Sleep(5 * time.Millisecond) // a runtime's pace, not a flood of its own
		}
		p99 := map[string]time.Duration{}
		for what, list := range took {
			slices.Sort(list)
			p99[what] = list[len(list)*99/100]
			t.Logf("%s: the other tenant's %s: %d requests, median %v, p99 %v", phase, what, len(list), list[len(list)/2], p99[what])
		}
		return p99
	}
	// attack runs n connections sending what next makes until stop is
	// closed, counting answers by status.
	attack := func(attacker string, n int, next func(conn, i int) (method, path, body string)) (stop func() map[int]int) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		var largest atomic.Int64
		for conn := range n {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					method, path, body := next(conn, i)
					status, size, err := do(ctx, method, path, attacker, body)
					if err != nil {
						status = -1
					}
					if int64(size) > largest.Load() {
						largest.Store(int64(size))
					}
					mu.Lock()
					statuses[status]++
					mu.Unlock()
				}
			})
		}
		return func() map[int]int {
			close(done)
			wg.Wait()
			t.Logf("largest answer to the attacker: %d bytes", largest.Load())
			return statuses
		}
	}

	var q strings.Builder
	q.WriteString(`{"query":"{`)
	for i := range 240 {
		fmt.Fprintf(&q, " a%d: handlers { document }", i)
	}
	q.WriteString(` }"}`)
	graphQL := q.String()
	words := strings.Fields("bike wheel tyre brake chain gear saddle pedal helmet light lock pump rental service repair order return warranty finance store hours")
	longQuestion := func(conn, i int) (string, string, string) {
		var b strings.Builder
		for k := 0; b.Len() < 1000; k++ {
			b.WriteString(words[(conn*7919+i*31+k*k)%len(words)])
			fmt.Fprintf(&b, "%d ", conn*1_000_000+i*1000+k)
		}
		return http.MethodGet, "/cms/search?question=" + strings.ReplaceAll(b.String()[:1000], " ", "+"), ""
	}
	offset := 0 // questions stay unique from round to round

	// Rounds of quiet, the GraphQL attack and the search attack; the
	// machine is noisy, so each p99 is compared with the same round's
	// quiet one and the median of the rounds' ratios must be within 2.
	const rounds = 3
	ratios := map[string][]float64{}
	for round := range rounds {
		quiet := measure(fmt.Sprintf("round %d, quiet", round+1), phase)

		stop := attack(attackers[0], 16, func(int, int) (string, string, string) { return http.MethodPost, "/cms/graphql", graphQL })
		underGraphQL := measure(fmt.Sprintf("round %d, under the GraphQL attack", round+1), phase)
		statuses := stop()
		t.Logf("GraphQL attack answered %v", statuses)
		if statuses[http.StatusOK] > 0 {
			t.Errorf("%d answers of 240 aliases of every handler's document were answered in full", statuses[http.StatusOK])
		}

		base := offset
		stop = attack(attackers[1], 6, func(conn, i int) (string, string, string) { return longQuestion(conn, base+i) })
		underSearches := measure(fmt.Sprintf("round %d, under the search attack", round+1), phase)
		statuses = stop()
		offset += 100_000
		t.Logf("search attack answered %v", statuses)

		for attack, p99 := range map[string]map[string]time.Duration{"GraphQL": underGraphQL, "search": underSearches} {
			for what, d := range p99 {
				key := "under the " + attack + " attack the other tenant's " + what
				ratios[key] = append(ratios[key], float64(d)/float64(quiet[what]))
			}
		}
	}

	peak, err := peakRSS(api.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("api peak RSS %d MiB (limit %d MiB)", peak>>20, tenantCostMemLimit>>20)
	if peak > tenantCostMemLimit {
		t.Errorf("the api's peak RSS %d MiB went past its memory limit of %d MiB", peak>>20, tenantCostMemLimit>>20)
	}
	for key, list := range ratios {
		slices.Sort(list)
		t.Logf("%s: p99 ÷ quiet p99 %.2f (rounds %.2f)", key, list[len(list)/2], list)
		if list[len(list)/2] > 2 {
			t.Errorf("%s: p99 %.2f times its quiet value (median of %d rounds: %.2f), want at most 2", key, list[len(list)/2], rounds, list)
		}
	}
}
