// Command demo sends realistic runtime traffic to a running stack, so that
// ClickHouse, HISTORICAL suggestions and dashboards fill up:
//
//	go run ./dev/demo -token "$TOKEN" [-sessions 5] [-duration 0]
//
// Conversations start at -sessions per second, each a LAUNCH_REQUEST and
// then up to -turns REQUEST_RESPONSE turns about -turn-gap apart, one PUT
// per turn as assistant runtimes send them, from a channel of the app.
// What users say comes from the app's own content in -content: intents'
// utterance patterns and FAQ questions. A live line shows sessions,
// requests, events accepted and latency; Ctrl-C stops (each conversation
// finishes the request it is sending) and prints the totals.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/demotraffic"
	"github.com/assistantcms/cms/pkg/content/bundle"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "http://127.0.0.1:18000/cms/app/events", "events endpoint (the local stack's one address by default)")
	token := flag.String("token", os.Getenv("CMS_TOKEN"), "app token (default $CMS_TOKEN); the local stack prints one")
	contentPath := flag.String("content", "deploy/demo/content.yaml", "content bundle the conversations are drawn from")
	appID := flag.String("app", "demo-app", "app of the bundle the token belongs to")
	sessions := flag.Float64("sessions", 5, "conversations started per second")
	turns := flag.Int("turns", 5, "most turns per conversation after the launch")
	gap := flag.Duration("turn-gap", time.Second, "mean pause between a conversation's turns")
	duration := flag.Duration("duration", 0, "how long to run; 0 runs until Ctrl-C")
	flag.Parse()
	if *token == "" {
		return fmt.Errorf("no token: pass -token or set CMS_TOKEN (go run ./deploy/local prints a demo token)")
	}
	f, err := os.Open(*contentPath)
	if err != nil {
		return err
	}
	format := bundle.JSON
	if ext := strings.ToLower(filepath.Ext(*contentPath)); ext == ".yaml" || ext == ".yml" {
		format = bundle.YAML
	}
	file, err := bundle.Read(f, format)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *contentPath, err)
	}
	ts, err := demotraffic.TurnsFrom(&file.Bundle, *appID)
	if err != nil {
		return err
	}
	var channels []string
	for _, a := range file.Bundle.Apps {
		if a.ID == *appID {
			for _, c := range a.Channels {
				channels = append(channels, c.ID)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	live := isTerminal(os.Stdout)
	var last time.Time
	progress := func(s demotraffic.Stats) {
		line := fmt.Sprintf("%6.0fs  sessions %d  requests %d (%.0f/s)  events accepted %d  quarantined %d  failed %d  p50 %s  p99 %s",
			s.Elapsed.Seconds(), s.Sessions, s.Requests, float64(s.Requests)/max(s.Elapsed.Seconds(), 0.001),
			s.Accepted, s.Quarantined, s.Failed, s.Latency.P50.Round(100*time.Microsecond), s.Latency.P99.Round(100*time.Microsecond))
		switch {
		case live:
			fmt.Printf("\r\033[K%s", line)
		case time.Since(last) >= 5*time.Second:
			fmt.Println(line)
			last = time.Now()
		}
	}
	fmt.Printf("Sending %d-turn conversations at %g/s to %s from %d phrases of %s (Ctrl-C stops).\n",
		*turns, *sessions, *url, len(ts), *appID)
	s, err := demotraffic.Run(ctx, demotraffic.Config{
		URL: *url, Token: *token, Turns: ts, Channels: channels, SessionsPerSecond: *sessions,
		TurnsPerSession: *turns, TurnGap: *gap, Duration: *duration,
	}, progress)
	if live {
		fmt.Println()
	}
	if err != nil {
		return err
	}
	fmt.Printf("Done: %d sessions, %d requests, %d events accepted, %d quarantined, %d failed %v.\n",
		s.Sessions, s.Requests, s.Accepted, s.Quarantined, s.Failed, s.Failures)
	tu := s.Turns
	fmt.Printf("Turns accepted: %d answered (%d from the knowledge base, %d with low confidence), %d fallback, %d failed.\n",
		tu.Answered, tu.KnowledgeBase, tu.LowConfidence, tu.Fallback, tu.Failed)
	if s.Failed > 0 {
		return fmt.Errorf("%d requests failed", s.Failed)
	}
	return nil
}

// isTerminal reports whether f is a terminal, where the progress line is
// rewritten in place.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
