// Package httpserve is how every service of the product serves HTTP: the
// http.Server with its limits, the metrics registry and the /metrics,
// /healthz and /readyz endpoints, readiness checks, JSON answers in the
// product's error shape, the profiling listener, and serving until a
// signal with a graceful drain.
//
// It is plumbing and imports no package of the product's domains: a
// service maps its own failures to statuses (pkg/auth/authhttp for
// tokens) and hands httpserve only handlers, checks and limits.
package httpserve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/assistantcms/cms/pkg/buildinfo"
)

// NewServer returns a server answering with h within limits l (taken as
// they are: fill them with Limits.Or first), logging what net/http
// reports about connections as warnings.
func NewServer(h http.Handler, l Limits, log *slog.Logger) *http.Server {
	srv := &http.Server{Handler: h, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	l.Apply(srv)
	return srv
}

// NewRegistry returns a metrics registry holding the Go runtime's and the
// process's collectors, the build's cms_build_info and cs.
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo()}, cs...)...)
	return reg
}

// buildInfo returns cms_build_info, a gauge always 1 whose labels name the
// running build, so that dashboards and the status page can show which
// version each instance runs.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cms_build_info",
		Help: "Always 1; the labels name the running build: version, source revision and Go version.",
		ConstLabels: prometheus.Labels{"version": buildinfo.Version(), "revision": buildinfo.Revision(),
			"goversion": buildinfo.GoVersion()},
	})
	g.Set(1)
	return g
}

// Mount registers the endpoints every service answers GET on: /metrics
// from reg, /healthz and /readyz from c. get registers one path with the
// caller's router.
func Mount(get func(path string, h http.Handler), reg prometheus.Gatherer, c *Checker) {
	get("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	get("/healthz", LiveHandler())
	get("/readyz", c.ReadyHandler())
}

// GetOn registers GET routes on mux, for Mount.
func GetOn(mux *http.ServeMux) func(path string, h http.Handler) {
	return func(path string, h http.Handler) { mux.Handle("GET "+path, h) }
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
// endpoints on debugAddr when it is set. With an operatorAddr it also
// opens the operator listener there, which the returned one carries for
// Serve.
func Listen(log *slog.Logger, addr, debugAddr, operatorAddr string) (net.Listener, error) {
	if debugAddr != "" {
		go ServeDebug(log, debugAddr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if operatorAddr == "" {
		return ln, nil
	}
	op, err := net.Listen("tcp", operatorAddr)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on the operator address %s: %w", operatorAddr, err)
	}
	return WithOperator(ln, op), nil
}

// Serve answers on ln with srv until ctx ends or serving fails. Then it
// fails readiness, so that load balancers stop sending, closes the
// listener and lets requests in flight finish within drain. name prefixes
// the log lines; attrs are logged with the listening line. When ln
// carries an operator listener, operator paths answer there only.
func Serve(ctx context.Context, log *slog.Logger, name string, srv *http.Server, ln net.Listener, c *Checker, drain time.Duration, attrs ...any) error {
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	if op := OperatorOf(ln); op != nil {
		opSrv := operatorServer(srv)
		srv.Handler = MainOnly(srv.Handler)
		servers = append(servers, opSrv)
		go func() { errc <- opSrv.Serve(op) }()
		log.Info(name+" operator endpoints listening", "addr", op.Addr().String())
	}
	// The main server gets the main listener alone: the operator one is
	// its own server's to close.
	main := ln
	if l, ok := ln.(*Listener); ok {
		main = l.Listener
	}
	go func() { errc <- srv.Serve(main) }()
	log.Info(name+" listening", append([]any{"addr", main.Addr().String()}, attrs...)...)
	select {
	case err := <-errc:
		// Neither listener outlives a failure, whichever server had
		// started; closing twice does no harm.
		ln.Close()
		for _, s := range servers {
			s.Close()
		}
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	log.Info(name+" shutting down", "timeout", drain.String())
	c.SetStopping()
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	return shutdown(sctx, servers)
}

// operatorServer returns the server of srv's operator listener: srv's
// handler filtered to operator paths, within the same limits.
func operatorServer(srv *http.Server) *http.Server {
	return &http.Server{Handler: OperatorOnly(srv.Handler), ErrorLog: srv.ErrorLog,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, operatorConn{}, true)
		},
		ReadHeaderTimeout: srv.ReadHeaderTimeout, ReadTimeout: srv.ReadTimeout, WriteTimeout: srv.WriteTimeout,
		IdleTimeout: srv.IdleTimeout, MaxHeaderBytes: srv.MaxHeaderBytes}
}

// shutdown drains every server at once within ctx.
func shutdown(ctx context.Context, servers []*http.Server) error {
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.Shutdown(ctx) }()
	}
	var first error
	for range servers {
		if err := <-errs; err != nil && first == nil {
			first = fmt.Errorf("drain HTTP requests: %w", err)
		}
	}
	return first
}
