// Command consumer reads the events and quarantine topics as a consumer
// group and writes them into ClickHouse. "consumer migrate" only applies
// the schema.
// Every setting is an environment variable with a flag of the same
// meaning; see README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/consumer"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := envflag.New(flag.NewFlagSet("consumer", flag.ContinueOnError), nil)
	svcFlags := launch.Define(fs, launch.Options{
		AddrEnv: "CONSUMER_ADDR", Addr: ":8082", AddrHelp: "HTTP listen address for /metrics, /healthz and /readyz",
		ShutdownTimeout: consumer.DefaultShutdownTimeout, ShutdownHelp: "time for the final flush on SIGTERM",
		HTTP: httpserve.DefaultLimits(),
	})
	brokers := fs.String("brokers", "KAFKA_BROKERS", "127.0.0.1:9092", "comma-separated Kafka bootstrap brokers")
	topic := fs.String("events-topic", "EVENTS_TOPIC", "cms.events", "topic of accepted events, written to the events table")
	quarantineTopic := fs.String("quarantine-topic", "QUARANTINE_TOPIC", "cms.events.quarantine", "topic of refused events, written to the quarantine table")
	group := fs.String("group", "CONSUMER_GROUP", "cms-clickhouse", "consumer group ID; instances with one group share the partitions")
	dlqTopic := fs.String("dead-letter-topic", "DEAD_LETTER_TOPIC", "cms.events.dead-letter", "topic for messages that can never be written")
	partitions := fs.Int("topic-partitions", "TOPIC_PARTITIONS", 6, "partitions of the events and quarantine topics if they must be created")
	replication := fs.Int("topic-replication", "TOPIC_REPLICATION", 1, "replication factor of topics created at start-up")
	maxMessage := fs.Int("kafka-max-message-bytes", "KAFKA_MAX_MESSAGE_BYTES", kafka.DefaultMaxMessageBytes, "max.message.bytes of topics created at start-up (raised on existing topics that have less); the largest record read or dead-lettered")
	sessionTimeout := fs.Duration("session-timeout", "KAFKA_SESSION_TIMEOUT", 10*time.Second, "consumer group session timeout")
	chAddrs := fs.String("clickhouse-addr", "CLICKHOUSE_ADDR", "127.0.0.1:9000", "comma-separated ClickHouse native-protocol addresses")
	chDB := fs.String("clickhouse-database", "CLICKHOUSE_DATABASE", "default", "ClickHouse database of the tables")
	chUser := fs.String("clickhouse-user", "CLICKHOUSE_USER", "default", "ClickHouse user")
	chPassword := fs.Secret("clickhouse-password", "CLICKHOUSE_PASSWORD", "", "ClickHouse password")
	retention := fs.Int("retention-days", "RETENTION_DAYS", 0, "drop events older than this many days (servers with TTL); 0 keeps them")
	batchRows := fs.Int("batch-rows", "BATCH_ROWS", consumer.DefaultBatchRows, "insert once a batch holds this many messages")
	batchBytes := fs.Int("batch-bytes", "BATCH_BYTES", consumer.DefaultBatchBytes, "insert once a batch's messages hold this many bytes")
	flushInterval := fs.Duration("flush-interval", "FLUSH_INTERVAL", consumer.DefaultFlushInterval, "insert a batch this long after its first message")
	retryMax := fs.Duration("retry-max", "RETRY_MAX", consumer.DefaultRetryMax, "longest wait between retries of a failed insert")
	if err := fs.Parse(args); err != nil {
		return err
	}
	settings, err := svcFlags.Start(os.Stderr)
	if err != nil {
		return err
	}
	log := settings.Log
	ctx, stop := launch.Signals(context.Background())
	defer stop()

	chCfg := chstore.Config{Addrs: envflag.List(*chAddrs), Database: *chDB, Username: *chUser, Password: *chPassword, RetentionDays: *retention}
	switch rest := fs.Args(); {
	case len(rest) == 1 && rest[0] == "migrate":
		return migrate(ctx, chCfg, log)
	case len(rest) > 0:
		return fmt.Errorf("unknown command %q; the only command is migrate", strings.Join(rest, " "))
	}

	svc, err := consumer.NewService(ctx, consumer.ServiceConfig{
		Brokers: envflag.List(*brokers), Topic: *topic, QuarantineTopic: *quarantineTopic, GroupID: *group, DeadLetterTopic: *dlqTopic,
		TopicPartitions: *partitions, TopicReplication: *replication, MaxMessageBytes: *maxMessage, SessionTimeout: *sessionTimeout,
		ClickHouse: chCfg,
		Consumer: consumer.Config{BatchRows: *batchRows, BatchBytes: *batchBytes, FlushInterval: *flushInterval,
			RetryMax: *retryMax, ShutdownTimeout: settings.ShutdownTimeout},
		Producer: kafka.ProducerConfig{},
		HTTP:     settings.HTTP,
	}, log)
	if err != nil {
		return err
	}
	return settings.Serve(ctx, svc.Run)
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
	log.Info("schema up to date", "applied", applied, "server_version", fmt.Sprintf("%d.%d", v.Major, v.Minor))
	return nil
}
