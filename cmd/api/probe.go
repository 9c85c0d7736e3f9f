package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content/admin"
)

// defaultProbeTimeout stays well under the interval container runtimes
// check health at, so a hung server fails the check instead of stacking
// probes.
const defaultProbeTimeout = 3 * time.Second

// maxReasonBytes bounds how much of a failing answer's body is quoted; a
// /readyz body names the failing check in its first bytes.
const maxReasonBytes = 200

// probe GETs one URL and returns 0 when it answers 2xx and 1 otherwise,
// with the reason on one line of stderr. Images without a shell or curl run
// it as their health check. Every failure, usage errors included, exits 1:
// Docker reserves exit code 2 of a health check.
func probe(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("api probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", defaultProbeTimeout, "give up after this `duration`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: api probe [-timeout DURATION] URL\n\nGET URL; exit 0 on a 2xx status, 1 otherwise.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return admin.ExitOK
		}
		return admin.ExitFailure
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "probe: want one URL, got %d arguments\n", fs.NArg())
		return admin.ExitFailure
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "probe: -timeout %s: must be positive\n", *timeout)
		return admin.ExitFailure
	}
	if err := get(ctx, fs.Arg(0), *timeout); err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return admin.ExitFailure
	}
	return admin.ExitOK
}

// get fails unless rawURL answers a GET with a 2xx status within timeout.
func get(ctx context.Context, rawURL string, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("URL %q: want http:// or https:// and a host", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("build request for %s: %w", u.Redacted(), err)
	}
	client := &http.Client{
		// One request per process: nothing to keep alive, and no proxy
		// between a health check and the server it checks.
		Transport: &http.Transport{DisableKeepAlives: true},
		// A redirect is not health: report the 3xx itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
	reason := strings.Join(strings.Fields(string(body)), " ")
	if reason == "" {
		return fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	return fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, reason)
}
