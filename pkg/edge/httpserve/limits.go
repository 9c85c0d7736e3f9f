package httpserve

import (
	"net/http"
	"time"
)

// Limits are an http.Server's timeouts and header limit: they bound what
// one client connection may cost, so that slow or oversized requests
// cannot hold a server's connections or memory. Zero fields take the
// defaults given to Or: net/http reads zero as no limit at all.
type Limits struct {
	// ReadHeaderTimeout cuts off clients trickling their headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers
	// to the end of the answer.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; larger ones
	// are answered 431.
	MaxHeaderBytes int
}

// Defaults of Limits for a service without reasons for others.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// DefaultLimits are the Default* limits together.
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes}
}

// Or fills the zero or negative fields of l from def.
func (l Limits) Or(def Limits) Limits {
	for _, f := range []struct{ v, def *time.Duration }{
		{&l.ReadHeaderTimeout, &def.ReadHeaderTimeout}, {&l.ReadTimeout, &def.ReadTimeout},
		{&l.WriteTimeout, &def.WriteTimeout}, {&l.IdleTimeout, &def.IdleTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = def.MaxHeaderBytes
	}
	return l
}

// Apply sets the limits on s.
func (l Limits) Apply(s *http.Server) {
	s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout = l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout
	s.MaxHeaderBytes = l.MaxHeaderBytes
}

// LimitsOf reads the limits set on s.
func LimitsOf(s *http.Server) Limits {
	return Limits{ReadHeaderTimeout: s.ReadHeaderTimeout, ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout,
		IdleTimeout: s.IdleTimeout, MaxHeaderBytes: s.MaxHeaderBytes}
}
