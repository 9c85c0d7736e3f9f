// Command api serves the content API ("api serve") and administers the
// content database: organizations, apps, access tokens and content
// bundles. Global flags go before the command:
//
//	api [-content-db PATH|URL] [-log-level LEVEL] <command> [flags]
//
// Every global flag can also be set through the environment variable named
// in its help; the flag wins. Run "api help" for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/buildinfo"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/admin"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/logging"
	"github.com/assistantcms/cms/pkg/sqldb"
)

func main() {
	ctx, stop := launch.Signals(context.Background())
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := envflag.New(flag.NewFlagSet("api", flag.ContinueOnError), lookupEnv)
	flagOut := &countingWriter{w: stderr}
	fs.SetOutput(flagOut)
	contentDB := fs.Secret("content-db", "CONTENT_DB", "cms.db", "content database: a SQLite file `path` or a postgres:// URL")
	logLevel := fs.String("log-level", "LOG_LEVEL", "info", "log `level`: debug, info, warn or error")
	// No variable, as for the services' -version.
	version := fs.FlagSet.Bool("version", false, "print the version, revision and Go version, and exit")
	fs.Usage = func() { usage(ctx, fs.FlagSet, fs.Output()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return admin.ExitOK
		}
		// The flag package reports bad flags itself; bad environment
		// values are left to us.
		if flagOut.n == 0 {
			fmt.Fprintln(stderr, "api:", err)
		}
		return admin.ExitUsage
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.String("api"))
		return admin.ExitOK
	}
	log, err := logging.Text(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "api:", err)
		return admin.ExitUsage
	}

	rest := fs.Args()
	switch {
	case len(rest) == 0:
		usage(ctx, fs.FlagSet, stderr)
		return admin.ExitUsage
	case len(rest) == 1 && rest[0] == "help":
		usage(ctx, fs.FlagSet, stdout)
		return admin.ExitOK
	case rest[0] == "probe":
		return probe(ctx, rest[1:], stderr)
	case rest[0] == "serve" || rest[0] == "gateway":
		run := func() error { return serve(ctx, rest[1:], lookupEnv, *contentDB, *logLevel, stderr) }
		if rest[0] == "gateway" {
			run = func() error { return runGateway(ctx, rest[1:], lookupEnv, *logLevel, stderr) }
		}
		if err := run(); err != nil {
			// -h and -version answer without serving.
			if errors.Is(err, flag.ErrHelp) || errors.Is(err, launch.ErrVersionPrinted) {
				return admin.ExitOK
			}
			fmt.Fprintln(stderr, "api:", err)
			return admin.ExitFailure
		}
		return admin.ExitOK
	}

	open := func(ctx context.Context) (content.Store, error) {
		start := time.Now()
		s, err := contentdb.Open(ctx, *contentDB)
		if err != nil {
			return nil, err
		}
		log.Debug("content database open", "database", sqldb.Describe(*contentDB), "elapsed", time.Since(start))
		return s, nil
	}
	code := admin.Run(ctx, rest, stdout, stderr, open)
	if ctx.Err() != nil {
		log.Warn("interrupted", "command", strings.Join(rest, " "))
	}
	return code
}

// usage prints the command list followed by the global flags.
func usage(ctx context.Context, fs *flag.FlagSet, w io.Writer) {
	admin.Run(ctx, []string{"help"}, w, w, nil)
	fmt.Fprintln(w, "\nServing:\n  serve [flags]\n        serve the content API (api serve -h lists its flags)")
	fmt.Fprintln(w, "  gateway [flags]\n        serve one address for clients: event batches to ingest, the rest to the API (api gateway -h)")
	fmt.Fprintln(w, "  probe [-timeout DURATION] URL\n        GET URL and exit 0 on a 2xx status, 1 otherwise (container health checks)")
	fmt.Fprintln(w, "\nGlobal flags (before the command):")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
