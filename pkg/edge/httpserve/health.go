package httpserve

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Check reports whether one dependency is usable.
type Check func(ctx context.Context) error

// Checker runs named readiness checks. Results are cached briefly so that
// frequent probes do not load the dependencies.
type Checker struct {
	checks   []named
	timeout  time.Duration
	cacheFor time.Duration
	stopping atomic.Bool

	mu      sync.Mutex
	last    time.Time
	lastErr map[string]string
}

type named struct {
	name  string
	check Check
}

// serverCheck names the failure of a process that is shutting down.
const serverCheck = "server"

// NewChecker returns a Checker with no checks.
func NewChecker() *Checker {
	return &Checker{timeout: 2 * time.Second, cacheFor: time.Second}
}

// Add registers a readiness check.
func (c *Checker) Add(name string, check Check) {
	c.checks = append(c.checks, named{name, check})
}

// SetStopping makes readiness fail from now on, so load balancers stop
// sending work while in-flight requests drain.
func (c *Checker) SetStopping() { c.stopping.Store(true) }

// Ready runs the checks (or returns the cached outcome) and returns the
// failures by check name.
func (c *Checker) Ready(ctx context.Context) map[string]string {
	if c.stopping.Load() {
		return map[string]string{serverCheck: "shutting down"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.last.IsZero() && time.Since(c.last) < c.cacheFor {
		return c.lastErr
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	failed := map[string]string{}
	for _, n := range c.checks {
		if err := n.check(ctx); err != nil {
			failed[n.name] = err.Error()
		}
	}
	c.last, c.lastErr = time.Now(), failed
	return failed
}

// LiveHandler answers 200 while the process runs.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// Withheld is what the client address says of a failing check in place
// of its error.
const Withheld = "failing (details on the operator address and in the log)"

// ReadyHandler answers 200 when every check passes, else 503 naming the
// failing checks. Their errors (addresses, broker and database messages)
// are for operators: only requests on the operator listener see them.
func (c *Checker) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failed := c.Ready(r.Context())
		if len(failed) == 0 {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
			return
		}
		if !onOperator(r.Context()) {
			brief := make(map[string]string, len(failed))
			for name, msg := range failed {
				if name == serverCheck {
					brief[name] = msg // "shutting down" tells nothing of the inside
					continue
				}
				brief[name] = Withheld
			}
			failed = brief
		}
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failed": failed})
	})
}

// operatorConn marks the context of requests on the operator listener.
type operatorConn struct{}

// onOperator reports whether a request came on the operator listener.
func onOperator(ctx context.Context) bool {
	v, _ := ctx.Value(operatorConn{}).(bool)
	return v
}
