package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/resubmit"
)

// resubmitCommand reads quarantined events from ClickHouse and publishes
// those that pass ingest's rules, as configured now, to the events topic.
func resubmitCommand(ctx context.Context, args []string, cfg ingest.ServiceConfig, log *slog.Logger) error {
	fs := envflag.New(flag.NewFlagSet("ingest resubmit", flag.ContinueOnError), nil)
	clickhouse := chstore.DefineFlags(fs, chstore.Tables)
	app := fs.FlagSet.String("app", "", "only events of this app")
	reason := fs.FlagSet.String("reason", "", "only events whose first error has this reason (too_large, type_not_allowed, ...)")
	since := fs.FlagSet.String("since", "", "only events received at or after this time: RFC 3339, or a duration ago (72h)")
	until := fs.FlagSet.String("until", "", "only events received before this time: RFC 3339, or a duration ago")
	limit := fs.FlagSet.Int("limit", 0, "at most this many events (0: all)")
	chunk := fs.FlagSet.Int("chunk", 500, "events read, checked and published at a time")
	dryRun := fs.FlagSet.Bool("dry-run", false, "check and count; publish nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("resubmit takes no arguments, got %q", fs.Args())
	}
	now := time.Now()
	f := resubmit.Filter{AppID: *app, Reason: *reason, Limit: *limit}
	var err error
	if f.Since, err = parseTime("-since", *since, now); err != nil {
		return err
	}
	if f.Until, err = parseTime("-until", *until, now); err != nil {
		return err
	}
	limits, err := cfg.EventLimits()
	if err != nil {
		return err
	}

	store, err := chstore.Open(ctx, clickhouse())
	if err != nil {
		return err
	}
	defer store.Close()
	cfg.Producer.BatchBytes, cfg.Producer.Logger = int64(cfg.MaxMessageBytes), log
	if !*dryRun {
		// The records may be larger than the topics took before.
		if err := cfg.Kafka.EnsureTopics(ctx, cfg.Topics()); err != nil {
			return fmt.Errorf("prepare Kafka topics: %w", err)
		}
	}
	pub, err := cfg.Kafka.NewProducer(cfg.Producer, cfg.EventsTopic, cfg.QuarantineTopic)
	if err != nil {
		return err
	}
	counts, err := resubmit.Run(ctx, resubmit.NewClickHouse(store), event.NewValidator(limits), pub, f,
		resubmit.Options{Chunk: *chunk, DryRun: *dryRun, Progress: func(c resubmit.Counts) { fmt.Fprintln(os.Stderr, c) }}, log)
	if cerr := pub.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("flush producer: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("resubmit (%s): %w", counts, err)
	}
	fmt.Println(counts)
	return nil
}

// parseTime reads an RFC 3339 time or a duration before now; empty is the
// zero time.
func parseTime(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-11-25T08:00:00Z) or a duration ago (72h)", flag, v)
}
