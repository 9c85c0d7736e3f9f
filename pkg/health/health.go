// Package health serves the liveness and readiness endpoints.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/assistantcms/cms/pkg/httpjson"
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

// New returns a Checker with no checks.
func New() *Checker {
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
		return map[string]string{"server": "shutting down"}
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
		httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// ReadyHandler answers 200 when every check passes, else 503 naming the
// failing checks.
func (c *Checker) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failed := c.Ready(r.Context()); len(failed) > 0 {
			httpjson.Write(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failed": failed})
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// ServeDebug serves Go's profiling endpoints on their own listener, so
// they are never reachable through a service's public address. It returns
// when the listener fails.
func ServeDebug(log *slog.Logger, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("debug endpoints listening", "addr", addr)
	if err := srv.ListenAndServe(); err != nil {
		log.Error("debug endpoints stopped", "err", err)
	}
}

// Listen opens a service's listener on addr, first starting the profiling
// endpoints on debugAddr when it is set.
func Listen(log *slog.Logger, addr, debugAddr string) (net.Listener, error) {
	if debugAddr != "" {
		go ServeDebug(log, debugAddr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve answers on ln with srv until ctx ends or serving fails. Then it
// fails readiness, so that load balancers stop sending, and lets requests
// in flight finish within drain. name prefixes the log lines; attrs are
// logged with the listening line.
func Serve(ctx context.Context, log *slog.Logger, name string, srv *http.Server, ln net.Listener, c *Checker, drain time.Duration, attrs ...any) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info(name+" listening", append([]any{"addr", ln.Addr().String()}, attrs...)...)
	select {
	case err := <-errc:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	log.Info(name+" shutting down", "timeout", drain.String())
	c.SetStopping()
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("drain HTTP requests: %w", err)
	}
	return nil
}
