// Command consumer reads the events and quarantine topics as a consumer
// group and writes them into ClickHouse. "consumer migrate" only applies
// the schema; "consumer forget-user" deletes one user's rows;
// "consumer block-suggestion", "unblock-suggestion" and
// "blocked-suggestions" keep texts out of HISTORICAL suggestions (see
// docs/operating.md).
// Every setting is an environment variable with a flag of the same
// meaning; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/consumer"
	"github.com/assistantcms/cms/pkg/pipeline/forgetuser"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

// run is the command: flags, then the consumer or one of its commands.
func run(args []string) error {
	fs := envflag.New(flag.NewFlagSet("consumer", flag.ContinueOnError), nil)
	svcFlags := launch.Define(fs, launch.Options{
		AddrEnv: "CONSUMER_ADDR", Addr: ":8082", AddrHelp: "HTTP listen address for /healthz, /readyz and, with -operator-addr listen, /metrics",
		ShutdownTimeout: consumer.DefaultShutdownTimeout, ShutdownHelp: "time for the final flush on SIGTERM",
		HTTP: httpserve.DefaultLimits(),
	})
	kafkaSettings := kafka.DefineFlags(fs, kafka.Consuming)
	group := fs.String("group", "CONSUMER_GROUP", "cms-clickhouse", "consumer group ID; instances with one group share the partitions")
	dlqTopic := fs.String("dead-letter-topic", "DEAD_LETTER_TOPIC", "cms.events.dead-letter", "topic for messages that can never be written")
	sessionTimeout := fs.Duration("session-timeout", "KAFKA_SESSION_TIMEOUT", kafka.DefaultSessionTimeout, "consumer group session timeout")
	fetchMinBytes := fs.Int("fetch-min-bytes", "KAFKA_FETCH_MIN_BYTES", kafka.DefaultMinBytes, "bytes of records a fetch waits for (up to -fetch-max-wait) before the broker answers; 1 answers at once")
	fetchMaxWait := fs.Duration("fetch-max-wait", "KAFKA_FETCH_MAX_WAIT", kafka.DefaultMaxWait, "longest a fetch waits for -fetch-min-bytes: how late a record can reach the consumer at a low rate")
	clickhouse := chstore.DefineFlags(fs, chstore.Tables)
	schema := fs.String("clickhouse-schema", "CLICKHOUSE_SCHEMA", "apply", "apply: apply missing migrations at start; wait: wait until \"consumer migrate\" has applied them")
	retention := fs.Int("retention-days", "RETENTION_DAYS", 0, "drop events older than this many days (servers with TTL); 0 keeps them")
	historyDays := fs.Int("history-days", "HISTORY_DAYS", chschema.DefaultHistoryDays, "days query_sources keeps asked queries for HISTORICAL suggestions, never more than -retention-days (servers with TTL; set when the table is created)")
	writing := defineWritingFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := writing.check(); err != nil {
		return err
	}
	settings, err := svcFlags.Start(os.Stderr)
	if errors.Is(err, launch.ErrVersionPrinted) {
		return nil
	}
	if err != nil {
		return err
	}
	log := settings.Log
	ctx, stop := launch.Signals(context.Background())
	defer stop()

	chCfg := clickhouse()
	chCfg.RetentionDays = *retention
	if *historyDays < 1 {
		return fmt.Errorf("-history-days (HISTORY_DAYS) %d: want 1 or more", *historyDays)
	}
	chCfg.HistoryDays = *historyDays
	if rest := fs.Args(); len(rest) > 0 {
		return command(ctx, chCfg, rest, log)
	}

	schemaMode, err := consumer.ParseSchema(*schema)
	if err != nil {
		return err
	}
	// Before the first query: clickhouse-go takes this for the process.
	chCfg.StringColumns = chstore.InstallStringColumns()
	ks := kafkaSettings()
	if err := ks.Check(); err != nil {
		return err
	}
	svc, err := consumer.NewService(ctx, consumer.ServiceConfig{
		Kafka: ks.Cluster, Topic: ks.EventsTopic, QuarantineTopic: ks.QuarantineTopic, GroupID: *group, DeadLetterTopic: *dlqTopic,
		TopicPartitions: ks.TopicPartitions, TopicReplication: ks.TopicReplication, MaxMessageBytes: ks.MaxMessageBytes, SessionTimeout: *sessionTimeout,
		FetchMinBytes: *fetchMinBytes, FetchMaxWait: *fetchMaxWait,
		TopicRetention: ks.TopicRetention, TopicMinInsyncReplicas: ks.TopicMinInsyncReplicas,
		ClickHouse: chCfg, Schema: schemaMode,
		Consumer: writing.config(settings.ShutdownTimeout),
		Producer: kafka.ProducerConfig{},
		HTTP:     settings.HTTP,
	}, log)
	if err != nil {
		return err
	}
	return settings.Serve(ctx, svc.Run)
}

// command runs one of the consumer's commands (rest is the command and
// its arguments) instead of the consumer.
func command(ctx context.Context, chCfg chstore.Config, rest []string, log *slog.Logger) error {
	switch {
	case len(rest) == 1 && rest[0] == "migrate":
		return migrate(ctx, chCfg, log)
	case rest[0] == "forget-user":
		return forgetUser(ctx, chCfg, rest[1:], os.Stdout, log)
	case rest[0] == "block-suggestion" || rest[0] == "unblock-suggestion":
		return blockSuggestion(ctx, chCfg, rest[0], rest[1:], os.Stdout, log)
	case rest[0] == "blocked-suggestions":
		return blockedSuggestions(ctx, chCfg, rest[1:], os.Stdout)
	}
	return fmt.Errorf("unknown command %q; the commands are migrate, forget-user, block-suggestion, unblock-suggestion and blocked-suggestions", strings.Join(rest, " "))
}

// writingFlags are how the consumer batches and retries its inserts, and
// which event times it believes.
type writingFlags struct {
	batchRows, batchBytes   *int
	flushInterval, retryMax *time.Duration
	maxFuture, maxPast      *time.Duration
}

func defineWritingFlags(fs *envflag.Set) writingFlags {
	return writingFlags{
		batchRows:     fs.Int("batch-rows", "BATCH_ROWS", consumer.DefaultBatchRows, "insert once a batch holds this many messages"),
		batchBytes:    fs.Int("batch-bytes", "BATCH_BYTES", consumer.DefaultBatchBytes, "insert once a batch's messages hold this many bytes"),
		flushInterval: fs.Duration("flush-interval", "FLUSH_INTERVAL", consumer.DefaultFlushInterval, "insert a batch this long after its first message"),
		retryMax:      fs.Duration("retry-max", "RETRY_MAX", consumer.DefaultRetryMax, "longest wait between retries of a failed insert"),
		maxFuture: fs.Duration("event-time-max-future", "EVENT_TIME_MAX_FUTURE", columns.DefaultMaxFuture,
			"how far after ingest received it an event's isoTime may lie and still be its event time (else the receipt is; the isoTime is kept in runtime_time)"),
		maxPast: fs.Duration("event-time-max-past", "EVENT_TIME_MAX_PAST", columns.DefaultMaxPast,
			"how far before ingest received it an event's isoTime may lie and still be its event time (else the receipt is; the isoTime is kept in runtime_time)"),
	}
}

func (f writingFlags) check() error {
	if *f.maxFuture <= 0 || *f.maxPast <= 0 {
		return fmt.Errorf("-event-time-max-future (EVENT_TIME_MAX_FUTURE) %s and -event-time-max-past (EVENT_TIME_MAX_PAST) %s: want both positive", *f.maxFuture, *f.maxPast)
	}
	return nil
}

// config is the consumer's configuration from the flags; shutdown bounds
// its final flush.
func (f writingFlags) config(shutdown time.Duration) consumer.Config {
	return consumer.Config{BatchRows: *f.batchRows, BatchBytes: *f.batchBytes, FlushInterval: *f.flushInterval,
		RetryMax: *f.retryMax, ShutdownTimeout: shutdown,
		EventTimes: columns.TimeWindow{MaxFuture: *f.maxFuture, MaxPast: *f.maxPast}}
}

func migrate(ctx context.Context, cfg chstore.Config, log *slog.Logger) error {
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil {
		return err
	}
	v := s.Version()
	log.Info("schema up to date", "applied", applied, "server_version", fmt.Sprintf("%d.%d", v.Major, v.Minor), "cluster", s.Cluster())
	return nil
}

// forgetUser runs "consumer forget-user -app A -user U [-dry-run]
// [-timeout D]" and writes what it deleted to out.
func forgetUser(ctx context.Context, cfg chstore.Config, args []string, out io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("consumer forget-user", flag.ContinueOnError)
	app := fs.String("app", "", "app ID whose user is forgotten")
	user := fs.String("user", "", "user ID to forget")
	dryRun := fs.Bool("dry-run", false, "only count and print what would be deleted")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up when the deletions have not finished on every server by then")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *app == "" || *user == "" || fs.NArg() > 0 || *timeout <= 0 {
		return errors.New("forget-user: want -app A -user U [-dry-run] [-timeout D], with a positive timeout")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	f, err := forgetuser.Forget(ctx, s, forgetuser.Request{AppID: *app, UserID: *user, DryRun: *dryRun}, log)
	if err != nil {
		return err
	}
	return f.Report(out)
}

// blockSuggestion runs "consumer block-suggestion|unblock-suggestion -app
// A [-channel C] -query TEXT" and says what it did on out.
func blockSuggestion(ctx context.Context, cfg chstore.Config, command string, args []string, out io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("consumer "+command, flag.ContinueOnError)
	app := fs.String("app", "", "app ID whose suggestions the text is kept out of")
	channel := fs.String("channel", "", "channel the block holds on (empty: every channel of the app)")
	query := fs.String("query", "", "the text, as users asked it (compared in normal form: trimmed, single-spaced, lower case)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *app == "" || strings.TrimSpace(*query) == "" || fs.NArg() > 0 {
		return fmt.Errorf("%s: want -app A [-channel C] -query TEXT", command)
	}
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	blocked := command == "block-suggestion"
	b, err := queryhistory.BlockSuggestion(ctx, s, *app, *channel, *query, blocked)
	if err != nil {
		return err
	}
	where := "every channel"
	if b.Channel != "" {
		where = fmt.Sprintf("channel %q", b.Channel)
	}
	done := "blocked"
	if !blocked {
		done = "unblocked"
	}
	log.Info("suggestion "+done, "app", b.AppID, "channel", b.Channel)
	_, err = fmt.Fprintf(out, "%s %q in app %q on %s\n", done, b.Query, b.AppID, where)
	return err
}

// blockedSuggestions runs "consumer blocked-suggestions [-app A]": the
// texts blocked now, a line each.
func blockedSuggestions(ctx context.Context, cfg chstore.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("consumer blocked-suggestions", flag.ContinueOnError)
	app := fs.String("app", "", "only this app's (empty: every app's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("blocked-suggestions: want [-app A]")
	}
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	blocks, err := queryhistory.BlockedSuggestions(ctx, s, *app)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tCHANNEL\tBLOCKED AT\tQUERY")
	for _, b := range blocks {
		channel := b.Channel
		if channel == "" {
			channel = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%q\n", b.AppID, channel, b.ChangedAt.UTC().Format(time.RFC3339), b.Query)
	}
	return tw.Flush()
}
