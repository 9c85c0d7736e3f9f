package faults

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// answer is one read of the content API.
type answer struct {
	at     time.Time
	took   time.Duration
	status int
	body   string
}

// reader reads the content API through the gateway, as a runtime does,
// until stopped, and keeps every answer.
type reader struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startReader(t *testing.T, e *env) *reader {
	r := &reader{stop: make(chan struct{})}
	base := "http://" + e.stack.Gateway
	paths := []string{"/cms/handler", "/cms/app", "/cms/search?question=return%20policy", "/cms/entity"}
	client := &http.Client{Timeout: 15 * time.Second}
	for w := range 4 {
		r.wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-r.stop:
					return
				case <-time.After(20 * time.Millisecond): // a steady, modest read rate
				}
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+paths[i%len(paths)], nil)
				req.Header.Set("Authorization", "Bearer "+e.stack.Token)
				sent := time.Now()
				a := answer{body: paths[i%len(paths)] + ": "}
				resp, err := client.Do(req)
				if err != nil {
					a.body = err.Error()
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					a.status, a.body = resp.StatusCode, a.body+string(b)
				}
				a.at = time.Now()
				a.took = a.at.Sub(sent)
				r.mu.Lock()
				r.answers = append(r.answers, a)
				r.mu.Unlock()
			}
		})
	}
	t.Cleanup(r.halt)
	return r
}

func (r *reader) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

// between counts the answers in [from, to) by status (0: no answer).
func (r *reader) between(from, to time.Time) (map[int]int, []answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[int]int{}
	var in []answer
	for _, a := range r.answers {
		if !a.at.Before(from) && a.at.Before(to) {
			counts[a.status]++
			in = append(in, a)
		}
	}
	return counts, in
}

// slowest is the longest an answer in took.
func slowest(in []answer) time.Duration {
	var m time.Duration
	for _, a := range in {
		m = max(m, a.took)
	}
	return m
}

// checkStatuses fails the test for any answer other than 200 and, where
// allowed, 503 with a message.
func checkStatuses(t *testing.T, in []answer, allow503 bool) {
	t.Helper()
	for _, a := range in {
		switch {
		case a.status == http.StatusOK:
		case a.status == http.StatusServiceUnavailable && allow503 && strings.Contains(a.body, `"message"`):
		default:
			t.Errorf("answer at %s: %d %.200s", a.at.Format("15:04:05.000"), a.status, a.body)
			return
		}
	}
}

// TestContentDatabaseLocked holds an exclusive lock on every content table
// for most of the outage grace while the api is read: answers come from
// the cache meanwhile, without waiting for the blocked revision reads.
func TestContentDatabaseLocked(t *testing.T) {
	e := shared
	r := startReader(t, e)
	waitFor(t, e, 30*time.Second, "reads answered before the fault", func() bool {
		c, _ := r.between(time.Time{}, time.Now())
		return c[http.StatusOK] >= 20
	})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.pg.DSN("faults"))
	must(t, e, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	must(t, e, err)
	var tables []string
	rows, err := tx.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
	must(t, e, err)
	for rows.Next() {
		var name string
		must(t, e, rows.Scan(&name))
		tables = append(tables, pgx.Identifier{name}.Sanitize())
	}
	must(t, e, rows.Err())
	_, err = tx.Exec(ctx, "LOCK TABLE "+strings.Join(tables, ", ")+" IN ACCESS EXCLUSIVE MODE")
	must(t, e, err)
	locked := time.Now()
	time.Sleep(grace - 2*time.Second) // the fault's length is the point of the test
	must(t, e, tx.Rollback(ctx))
	unlocked := time.Now()
	time.Sleep(2 * time.Second) // reads after the fault, at the reader's pace
	r.halt()

	counts, in := r.between(locked, unlocked)
	checkStatuses(t, in, false)
	if counts[http.StatusOK] < 50 {
		t.Errorf("only %d reads answered while the tables were locked: %v", counts[http.StatusOK], counts)
	}
	// A read waits for a blocked revision read at most checkWait (100 ms)
	// in the api, which contentapi's cache tests check by the order of
	// events. Here no read may have waited for the lock itself: half its
	// length is a bound a loaded machine keeps; the slowest is logged.
	if s, held := slowest(in), unlocked.Sub(locked); s > held/2 {
		t.Errorf("a read took %s while the tables were locked for %s", s, held.Round(time.Second))
	}
	after, inAfter := r.between(unlocked, time.Now())
	checkStatuses(t, inAfter, false)
	t.Logf("figure: %d tables locked for %s; reads meanwhile %v, slowest %s; after %v", len(tables), unlocked.Sub(locked).Round(time.Second), counts, slowest(in).Round(time.Millisecond), after)
}

// TestContentDatabaseUnreachable stops PostgreSQL for longer than the
// api's outage grace: cached answers first, then a clear 503, never a 500,
// and full service once the database is back.
func TestContentDatabaseUnreachable(t *testing.T) {
	e := shared
	r := startReader(t, e)
	waitFor(t, e, 30*time.Second, "reads answered before the fault", func() bool {
		c, _ := r.between(time.Time{}, time.Now())
		return c[http.StatusOK] >= 20
	})
	t.Cleanup(func() {
		if e.pg.PID() == 0 {
			if err := e.pg.Start(context.Background()); err != nil {
				t.Errorf("restart PostgreSQL: %v", err)
			}
		}
	})

	must(t, e, e.pg.Stop())
	down := time.Now()
	time.Sleep(grace + 6*time.Second) // the fault's length is the point of the test
	must(t, e, e.pg.Start(t.Context()))
	up := time.Now()
	recovered := waitFor(t, e, 60*time.Second, "a 200 after PostgreSQL's return", func() bool {
		c, _ := r.between(up, time.Now())
		return c[http.StatusOK] > 0
	})
	time.Sleep(2 * time.Second) // reads after the fault, at the reader's pace
	r.halt()

	// Within the grace, less a second for the api to notice the outage.
	inGrace, inG := r.between(down, down.Add(grace-time.Second))
	checkStatuses(t, inG, false)
	beyond, inB := r.between(down.Add(grace+2*time.Second), up)
	checkStatuses(t, inB, true)
	if beyond[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no 503 after the grace ran out: %v", beyond)
	}
	after, inA := r.between(up.Add(recovered), time.Now())
	checkStatuses(t, inA, false)
	t.Logf("figure: PostgreSQL down %s (grace %s); reads within the grace %v; after it %v; first 200 %s after the return; after that %v",
		up.Sub(down).Round(time.Second), grace, inGrace, beyond, recovered.Round(time.Millisecond), after)
}
