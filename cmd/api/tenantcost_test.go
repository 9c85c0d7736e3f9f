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
// Quiet seconds and seconds of each attack take turns, eight times
// over, while the other tenant's runtime reads and searches throughout.
// The api stays under its memory limit and the other tenant's p99 under
// the GraphQL attack within twice its p99 in the quiet seconds, under the
// search attack within three times (see bound).
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

	victimPaths := []struct{ what, path string }{
		{"REST read", "/cms/handler/OpeningHours"},
		{"search", "/cms/search?question=can+i+borrow+a+bike+for+the+weekend"},
	}

	// The phases take turns a second at a time, so that whatever else
	// the machine does falls on quiet and attacked seconds alike.
	board := newSwitchboard()
	const (
		quiet = iota
		graphQLAttack
		searchAttack
	)
	phaseNames := []string{"quiet", "the GraphQL attack", "the search attack"}

	// attack runs n connections sending what next makes while the board
	// is at phase, until it is stopped, counting answers by status.
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]map[int]int{graphQLAttack: {}, searchAttack: {}}
	var largest [3]atomic.Int64
	attack := func(phase int, attacker string, n int, next func(conn, i int) (method, path, body string)) {
		for conn := range n {
			wg.Go(func() {
				for i := 0; board.await(phase); i++ {
					method, path, body := next(conn, i)
					status, size, err := do(ctx, method, path, attacker, body)
					if err != nil {
						status = -1
					}
					if int64(size) > largest[phase].Load() {
						largest[phase].Store(int64(size))
					}
					mu.Lock()
					statuses[phase][status]++
					mu.Unlock()
				}
			})
		}
	}

	var q strings.Builder
	q.WriteString(`{"query":"{`)
	for i := range 240 {
		fmt.Fprintf(&q, " a%d: handlers { document }", i)
	}
	q.WriteString(` }"}`)
	graphQL := q.String()
	attack(graphQLAttack, attackers[0], 16, func(int, int) (string, string, string) { return http.MethodPost, "/cms/graphql", graphQL })
	words := strings.Fields("bike wheel tyre brake chain gear saddle pedal helmet light lock pump rental service repair order return warranty finance store hours")
	attack(searchAttack, attackers[1], 6, func(conn, i int) (string, string, string) {
		var b strings.Builder
		for k := 0; b.Len() < 1000; k++ {
			b.WriteString(words[(conn*7919+i*31+k*k)%len(words)])
			fmt.Fprintf(&b, "%d ", conn*1_000_000+i*1000+k)
		}
		return http.MethodGet, "/cms/search?question=" + strings.ReplaceAll(b.String()[:1000], " ", "+"), ""
	})

	// The other tenant's runtime reads and searches, one request after
	// another at a runtime's pace, throughout; a request counts for the
	// phase it ran in, once the phase has settled (what the previous one
	// started has ended).
	const settle = 250 * time.Millisecond
	took := [3]map[string][]time.Duration{{}, {}, {}}
	victimDone := make(chan struct{})
	go func() {
		defer close(victimDone)
		for {
			for _, v := range victimPaths {
				phase, since, ok := board.now()
				if !ok {
					return
				}
				start := time.Now()
				status, _, err := do(ctx, http.MethodGet, v.path, victim, "")
				if err != nil || status != http.StatusOK {
					t.Errorf("the other tenant's %s: %d %v", v.what, status, err)
					return
				}
				d := time.Since(start)
				if after, _, _ := board.now(); after == phase && since >= settle {
					took[phase][v.what] = append(took[phase][v.what], d)
				}
			}
			time.Sleep(5 * time.Millisecond) // a runtime's pace, not a flood of its own
		}
	}()
	const cycles = 8
	for range cycles {
		for _, phase := range []int{quiet, graphQLAttack, searchAttack} {
			board.set(phase)
			time.Sleep(settle + time.Second) // the phase's length
		}
	}
	board.stop()
	<-victimDone
	wg.Wait()

	for _, phase := range []int{graphQLAttack, searchAttack} {
		t.Logf("%s answered %v; the largest answer %d bytes", phaseNames[phase], statuses[phase], largest[phase].Load())
	}
	if n := statuses[graphQLAttack][http.StatusOK]; n > 0 {
		t.Errorf("%d answers of 240 aliases of every handler's document were answered in full", n)
	}
	p99 := func(phase int, what string) time.Duration {
		list := took[phase][what]
		if len(list) < 100 {
			t.Fatalf("only %d of the other tenant's %s requests in %s", len(list), what, phaseNames[phase])
		}
		slices.Sort(list)
		d := list[len(list)*99/100]
		t.Logf("%s: the other tenant's %s: %d requests, median %v, p99 %v", phaseNames[phase], what, len(list), list[len(list)/2], d)
		return d
	}
	// The GraphQL attack is refused cheaply: twice the quiet p99. The
	// search attack is served within its token's rate: its questions rank
	// on one core in turn with the other tenant's, whose requests, the
	// test's clients and the api's other work share the second core of a
	// two-core machine; over nine runs that cost the other tenant's
	// sub-millisecond p99 1.0 to 2.3 times, its median nothing (the other
	// tenant used to wait 90 to 160 ms).
	bound := map[int]time.Duration{graphQLAttack: 2, searchAttack: 3}
	for _, v := range victimPaths {
		calm := p99(quiet, v.what)
		for _, phase := range []int{graphQLAttack, searchAttack} {
			if d := p99(phase, v.what); d > bound[phase]*calm {
				t.Errorf("under %s the other tenant's %s p99 is %v, more than %d times its quiet %v", phaseNames[phase], v.what, d, bound[phase], calm)
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
}

// switchboard says which phase of a test runs, and since when.
type switchboard struct {
	mu      sync.Mutex
	phase   int
	since   time.Time
	done    bool
	changed chan struct{} // closed at the next change
}

func newSwitchboard() *switchboard {
	return &switchboard{since: time.Now(), changed: make(chan struct{})}
}

func (s *switchboard) set(phase int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.since = phase, time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *switchboard) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	close(s.changed)
	s.changed = make(chan struct{})
}

// now is the phase, how long it has run, and false once stopped.
func (s *switchboard) now() (int, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase, time.Since(s.since), !s.done
}

// await waits until the board is at phase; false once it is stopped.
func (s *switchboard) await(phase int) bool {
	for {
		s.mu.Lock()
		cur, done, changed := s.phase, s.done, s.changed
		s.mu.Unlock()
		switch {
		case done:
			return false
		case cur == phase:
			return true
		}
		<-changed
	}
}
