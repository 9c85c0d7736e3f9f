package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"

	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/gateway"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
)

// runGateway serves the one address clients call until ctx ends: event
// batches go to ingest, everything else to the content API.
func runGateway(ctx context.Context, args []string, lookupEnv func(string) (string, bool), logLevel string, stderr io.Writer) error {
	fs := envflag.New(flag.NewFlagSet("api gateway", flag.ContinueOnError), lookupEnv)
	fs.SetOutput(stderr)
	svcFlags := launch.Define(fs, launch.Options{
		AddrEnv: "GATEWAY_ADDR", Addr: ":8000", AddrHelp: "HTTP listen address",
		ShutdownTimeout: gateway.DefaultShutdownTimeout, ShutdownHelp: "time allowed to drain requests on SIGTERM",
		LogLevel: &logLevel, CORS: true,
		HTTP: httpserve.Limits{ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout, ReadTimeout: gateway.DefaultReadTimeout,
			WriteTimeout: gateway.DefaultWriteTimeout, IdleTimeout: gateway.DefaultIdleTimeout, MaxHeaderBytes: gateway.DefaultMaxHeaderBytes},
	})
	ingestURL := fs.String("ingest-url", "INGEST_URL", "http://127.0.0.1:8081", "base URL of the ingest service")
	apiURL := fs.String("api-url", "API_URL", "http://127.0.0.1:8080", "base URL of the content API")
	respTimeout := fs.Duration("response-timeout", "GATEWAY_RESPONSE_TIMEOUT", gateway.DefaultResponseTimeout, "longest wait for an upstream's response headers")
	minRate := fs.Int64("min-upload-rate", "GATEWAY_MIN_UPLOAD_RATE", gateway.DefaultMinUploadRate, "bytes a second an event batch must keep up after -min-upload-grace, as ingest's MIN_UPLOAD_RATE: a batch has the grace plus a second for every this many bytes to arrive, else 408 (0: no minimum)")
	minGrace := fs.Duration("min-upload-grace", "GATEWAY_MIN_UPLOAD_GRACE", gateway.DefaultMinUploadGrace, "time every event batch has before -min-upload-rate counts")
	trusted := fs.String("trusted-proxies", "GATEWAY_TRUSTED_PROXIES", "",
		"comma-separated networks (CIDR) or addresses of the proxies in front of the gateway (a load balancer), whose X-Forwarded-For it passes on (empty: none; a client's own is dropped)")
	source := fs.String("source-addr", "GATEWAY_SOURCE_ADDR", "",
		"local address the gateway connects to ingest and the api from (127.0.0.2, say), so that on one host they trust that address as their proxy (TRUSTED_PROXIES) and no other local client; empty: the system picks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gateway: unexpected argument %q", fs.Arg(0))
	}
	settings, err := svcFlags.Start(stderr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	trustedProxies, err := clientnet.ParseTrusted(*trusted)
	if err != nil {
		return fmt.Errorf("gateway: -trusted-proxies (GATEWAY_TRUSTED_PROXIES): %w", err)
	}
	var sourceAddr netip.Addr
	if *source != "" {
		if sourceAddr, err = netip.ParseAddr(*source); err != nil {
			return fmt.Errorf("gateway: -source-addr (GATEWAY_SOURCE_ADDR) %q: want an IP address of this host, such as 127.0.0.2: %w", *source, err)
		}
	}
	pace := httpserve.MinUploadRate{Rate: *minRate, Grace: *minGrace}
	if pace.Rate <= 0 {
		pace.Rate = -1 // the Config's zero means its default
	}
	g, err := gateway.New(gateway.Config{Ingest: *ingestURL, API: *apiURL, ResponseTimeout: *respTimeout,
		ShutdownTimeout: settings.ShutdownTimeout, CORS: settings.CORS, HTTP: settings.HTTP, MinUploadRate: pace,
		TrustedProxies: trustedProxies, SourceAddr: sourceAddr}, settings.Log)
	if err != nil {
		return err
	}
	return settings.Serve(ctx, g.Serve)
}
