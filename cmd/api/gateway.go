package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/assistantcms/cms/pkg/edge/gateway"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/logging"
)

// runGateway serves the one address clients call until ctx ends: event
// batches go to ingest, everything else to the content API.
func runGateway(ctx context.Context, args []string, lookupEnv func(string) (string, bool), logLevel string, stderr io.Writer) error {
	fs := envflag.New(flag.NewFlagSet("api gateway", flag.ContinueOnError), lookupEnv)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "GATEWAY_ADDR", ":8000", "HTTP listen address")
	ingestURL := fs.String("ingest-url", "INGEST_URL", "http://127.0.0.1:8081", "base URL of the ingest service")
	apiURL := fs.String("api-url", "API_URL", "http://127.0.0.1:8080", "base URL of the content API")
	respTimeout := fs.Duration("response-timeout", "GATEWAY_RESPONSE_TIMEOUT", gateway.DefaultResponseTimeout, "longest wait for an upstream's response headers")
	shutdown := fs.Duration("shutdown-timeout", "SHUTDOWN_TIMEOUT", gateway.DefaultShutdownTimeout, "time allowed to drain requests on SIGTERM")
	debugAddr := fs.String("debug-addr", "DEBUG_ADDR", "", "address for Go profiling endpoints (/debug/pprof/); empty disables; keep it on loopback")
	httpLimits := defineHTTPFlags(fs, httpDefaults{readHeader: gateway.DefaultReadHeaderTimeout, read: gateway.DefaultReadTimeout,
		write: gateway.DefaultWriteTimeout, idle: gateway.DefaultIdleTimeout, maxHeader: gateway.DefaultMaxHeaderBytes})
	corsPolicy := defineCORSFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := httpLimits.check(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	allowedOrigins, err := corsPolicy()
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gateway: unexpected argument %q", fs.Arg(0))
	}
	log, err := logging.JSON(stderr, logLevel)
	if err != nil {
		return err
	}
	g, err := gateway.New(gateway.Config{Ingest: *ingestURL, API: *apiURL, ResponseTimeout: *respTimeout, ShutdownTimeout: *shutdown, CORS: allowedOrigins,
		HTTP: httpserve.Limits{ReadHeaderTimeout: *httpLimits.readHeader, ReadTimeout: *httpLimits.read,
			WriteTimeout: *httpLimits.write, IdleTimeout: *httpLimits.idle, MaxHeaderBytes: *httpLimits.maxHeader}}, log)
	if err != nil {
		return err
	}
	ln, err := httpserve.Listen(log, *addr, *debugAddr)
	if err != nil {
		return err
	}
	return g.Serve(ctx, ln)
}
