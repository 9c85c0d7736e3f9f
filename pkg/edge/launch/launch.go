// Package launch is what the services (ingest, consumer, api serve and
// api gateway) share between their command line and serving: the flags
// every one of them has (listen address, profiling address, shutdown
// timeout, log level, HTTP limits and, where pages may call, CORS
// origins), and the start-up once they are parsed: the logger, the
// signal context, the listeners and serving until a signal. Every
// service also answers -version and logs its build when it starts.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/pkg/buildinfo"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/logging"
)

// Options are what differs between services in the shared flags.
type Options struct {
	// AddrEnv names the variable of -addr, Addr is its default and
	// AddrHelp its help.
	AddrEnv, Addr, AddrHelp string
	// ShutdownTimeout is the default of -shutdown-timeout, ShutdownHelp
	// its help.
	ShutdownTimeout time.Duration
	ShutdownHelp    string
	// LogLevel, when not nil, is the level given by a flag defined
	// elsewhere (api's global -log-level); otherwise -log-level is
	// defined here.
	LogLevel *string
	// CORS defines -cors-allowed-origins, for services that pages call
	// from a browser.
	CORS bool
	// HTTP are the defaults of the limits' flags.
	HTTP httpserve.Limits
	// WriteTimeoutRule, when set, lets -write-timeout be zero, meaning
	// the service derives it by this rule, which the help states.
	WriteTimeoutRule string
	// FormerEnv maps variables of these flags to former names still
	// read, with a deprecation warning.
	FormerEnv map[string]string
}

// Flags are the shared flags, defined on a service's flag set.
type Flags struct {
	opts                          Options
	fs                            *envflag.Set
	addr, debugAddr, logLevel     *string
	operatorAddr                  *string
	cors                          *string
	shutdown                      *time.Duration
	readHeader, read, write, idle *time.Duration
	maxHeader                     *int
	version                       *bool
	// stdout is where -version prints; os.Stdout but in tests.
	stdout io.Writer
}

// Names of the shared variables.
const (
	EnvShutdownTimeout   = "SHUTDOWN_TIMEOUT"
	EnvDebugAddr         = "DEBUG_ADDR"
	EnvOperatorAddr      = "OPERATOR_ADDR"
	EnvLogLevel          = "LOG_LEVEL"
	EnvCORSOrigins       = "CORS_ALLOWED_ORIGINS"
	EnvReadHeaderTimeout = "HTTP_READ_HEADER_TIMEOUT"
	EnvReadTimeout       = "HTTP_READ_TIMEOUT"
	EnvWriteTimeout      = "HTTP_WRITE_TIMEOUT"
	EnvIdleTimeout       = "HTTP_IDLE_TIMEOUT"
	EnvMaxHeaderBytes    = "HTTP_MAX_HEADER_BYTES"
)

// DefaultOperatorAddr keeps the operator endpoints off the listen
// address unless a deployment says where they go: a free port on
// loopback, which the start-up log names, so that several processes on
// one host never contend for it.
const DefaultOperatorAddr = "127.0.0.1:0"

// OnListenAddr as the operator address serves the operator endpoints on
// the listen address, as earlier releases did by default; so does an empty
// -operator-addr.
const OnListenAddr = "listen"

// Define defines the shared flags on fs, with o's defaults.
func Define(fs *envflag.Set, o Options) *Flags {
	for env, old := range o.FormerEnv {
		fs.Alias(env, old)
	}
	f := &Flags{opts: o, fs: fs, logLevel: o.LogLevel, stdout: os.Stdout}
	// No variable: a setting left in the environment must never stop a
	// service from starting.
	f.version = fs.FlagSet.Bool("version", false, "print the version, revision and Go version, and exit")
	f.addr = fs.String("addr", o.AddrEnv, o.Addr, o.AddrHelp)
	f.shutdown = fs.Duration("shutdown-timeout", EnvShutdownTimeout, o.ShutdownTimeout, o.ShutdownHelp)
	if f.logLevel == nil {
		f.logLevel = fs.String("log-level", EnvLogLevel, "info", "debug, info, warn or error")
	}
	f.debugAddr = fs.String("debug-addr", EnvDebugAddr, "", "address for Go profiling endpoints (/debug/pprof/); empty disables; keep it on loopback")
	f.operatorAddr = fs.String("operator-addr", EnvOperatorAddr, DefaultOperatorAddr, "address for the operator endpoints (/metrics, /debug/pprof/, /readyz with its checks' errors and, on the api, /status and /analytics), which the listen address then answers 404; the default is a free port on loopback, logged at start; "+OnListenAddr+" (or an empty flag): served on the listen address; never publish it to clients")
	writeHelp := "longest time from the end of a request's headers to the end of its answer"
	if o.WriteTimeoutRule != "" {
		writeHelp += " (0: " + o.WriteTimeoutRule + ")"
	}
	f.readHeader = fs.Duration("read-header-timeout", EnvReadHeaderTimeout, o.HTTP.ReadHeaderTimeout, "longest time to read a request's headers; slower clients are cut off")
	f.read = fs.Duration("read-timeout", EnvReadTimeout, o.HTTP.ReadTimeout, "longest time to read a whole request, body included")
	f.write = fs.Duration("write-timeout", EnvWriteTimeout, o.HTTP.WriteTimeout, writeHelp)
	f.idle = fs.Duration("idle-timeout", EnvIdleTimeout, o.HTTP.IdleTimeout, "how long a kept-alive connection may wait for its next request")
	f.maxHeader = fs.Int("max-header-bytes", EnvMaxHeaderBytes, o.HTTP.MaxHeaderBytes, "largest request line and headers; larger ones get 431")
	if o.CORS {
		f.cors = fs.String("cors-allowed-origins", EnvCORSOrigins, "", "comma-separated origins (scheme://host[:port]) whose pages may call from a browser; * for any; empty: none")
	}
	return f
}

// Settings are the shared settings of a started service.
type Settings struct {
	// Addr is the listen address, DebugAddr the profiling one (empty:
	// none).
	Addr, DebugAddr string
	// OperatorAddr, when set, is where the operator endpoints answer
	// instead of Addr.
	OperatorAddr    string
	ShutdownTimeout time.Duration
	// HTTP are the server's limits as given; a zero WriteTimeout is left
	// to the service's rule (Options.WriteTimeoutRule).
	HTTP httpserve.Limits
	// CORS is the policy of -cors-allowed-origins; nil without the flag.
	CORS *cors.Policy
	// Log writes JSON lines at the configured level.
	Log *slog.Logger
}

// ErrVersionPrinted is what Start returns for -version, once the version
// is printed: the command exits 0 without starting.
var ErrVersionPrinted = errors.New("version printed")

// Start checks the shared settings once the flag set is parsed and
// returns them with a logger writing JSON lines to w, which first logs
// the build and warns of each former variable name the environment set.
// With -version it only prints the version to stdout and returns
// ErrVersionPrinted.
func (f *Flags) Start(w io.Writer) (Settings, error) {
	if *f.version {
		// "api serve" is the api binary: the version is the binary's.
		program, _, _ := strings.Cut(f.fs.Name(), " ")
		if _, err := fmt.Fprintln(f.stdout, buildinfo.String(program)); err != nil {
			return Settings{}, fmt.Errorf("print the version: %w", err)
		}
		return Settings{}, ErrVersionPrinted
	}
	op := *f.operatorAddr
	if op == OnListenAddr {
		op = ""
	}
	s := Settings{Addr: *f.addr, DebugAddr: *f.debugAddr, OperatorAddr: op, ShutdownTimeout: *f.shutdown,
		HTTP: httpserve.Limits{ReadHeaderTimeout: *f.readHeader, ReadTimeout: *f.read, WriteTimeout: *f.write,
			IdleTimeout: *f.idle, MaxHeaderBytes: *f.maxHeader}}
	if err := f.checkLimits(); err != nil {
		return s, err
	}
	if f.cors != nil {
		p, err := cors.New(envflag.List(*f.cors))
		if err != nil {
			return s, fmt.Errorf("-cors-allowed-origins (%s): %w", EnvCORSOrigins, err)
		}
		s.CORS = p
	}
	log, err := logging.JSON(w, *f.logLevel)
	if err != nil {
		return s, err
	}
	log.Info("starting", "command", f.fs.Name(), "version", buildinfo.Version(), "revision", buildinfo.Revision(),
		"go_version", buildinfo.GoVersion())
	f.fs.LogDeprecations(log)
	s.Log = log
	return s, nil
}

// checkLimits refuses values that would switch a limit off: net/http
// reads zero as no limit at all.
func (f *Flags) checkLimits() error {
	for _, d := range []struct {
		name   string
		v      time.Duration
		zeroOK bool
	}{
		{"read-header-timeout", *f.readHeader, false}, {"read-timeout", *f.read, false},
		{"write-timeout", *f.write, f.opts.WriteTimeoutRule != ""}, {"idle-timeout", *f.idle, false},
	} {
		if d.v < 0 || d.v == 0 && !d.zeroOK {
			return fmt.Errorf("-%s %s: must be positive", d.name, d.v)
		}
	}
	if *f.maxHeader < 1024 {
		return fmt.Errorf("-max-header-bytes %d: must be at least 1024", *f.maxHeader)
	}
	return nil
}

// Signals returns a context that ends on SIGINT or SIGTERM, the signals
// that stop a service gracefully.
func Signals(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// Serve opens the listener on the settings' address, the operator one
// and the profiling endpoints when addresses are given for them, then
// runs serve on it: a service's own Serve, which answers until ctx ends
// and then drains.
func (s Settings) Serve(ctx context.Context, serve func(ctx context.Context, ln net.Listener) error) error {
	ln, err := httpserve.Listen(s.Log, s.Addr, s.DebugAddr, s.OperatorAddr)
	if err != nil {
		return err
	}
	return serve(ctx, ln)
}
