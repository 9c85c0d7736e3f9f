package httpserve

import (
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
)

// IsOperatorPath reports whether path is an operator path: /metrics,
// /debug/pprof, /status or /analytics, or anything below them. These are
// what operators and Prometheus read; with an operator address they
// answer only there, so that the address clients call never shows them.
func IsOperatorPath(path string) bool {
	for _, p := range [...]string{"/metrics", "/debug/pprof", "/status", "/analytics"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// IsHealthPath reports whether path is /healthz or /readyz, which both
// listeners answer: probes may use either.
func IsHealthPath(path string) bool { return path == "/healthz" || path == "/readyz" }

// Listener is a service's main listener and, when an operator address
// was given, the operator listener beside it.
type Listener struct {
	net.Listener
	operator net.Listener
}

// WithOperator returns main carrying op as its operator listener; Serve
// then answers operator paths on op only. A nil op leaves main alone.
func WithOperator(main, op net.Listener) net.Listener {
	if op == nil {
		return main
	}
	return &Listener{Listener: main, operator: op}
}

// Operator returns the operator listener, nil when there is none.
func (l *Listener) Operator() net.Listener { return l.operator }

// Close closes both listeners.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	if l.operator != nil {
		if oerr := l.operator.Close(); err == nil {
			err = oerr
		}
	}
	return err
}

// OperatorOf returns the operator listener ln carries, nil when none.
func OperatorOf(ln net.Listener) net.Listener {
	if l, ok := ln.(*Listener); ok {
		return l.operator
	}
	return nil
}

// MainOnly answers operator paths 404, saying where they are served, and
// passes every other request to h.
func MainOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsOperatorPath(r.URL.Path) {
			Error(w, http.StatusNotFound, "", r.URL.Path+" is served on the operator address, not this one.")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// OperatorOnly answers the operator listener: the profiling endpoints,
// and operator and health paths from h; every other path is 404, since
// clients call the main address.
func OperatorOnly(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mountPprof(mux)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsOperatorPath(r.URL.Path) && !IsHealthPath(r.URL.Path) {
			Error(w, http.StatusNotFound, "", r.URL.Path+" is not served on the operator address.")
			return
		}
		h.ServeHTTP(w, r)
	}))
	return mux
}

// mountPprof registers Go's profiling endpoints on mux.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
