// Command loadgen sends PUT /cms/app/events batches of REQUEST_RESPONSE
// events to a running ingest service and prints throughput and latency;
// with -pid it also reports that process's CPU time and peak RSS.
//
// Closed loop, 32 workers for 20 s:
//
//	go run ./dev/loadgen -url http://127.0.0.1:8081/cms/app/events -token "$TOKEN" -concurrency 32 -duration 20s -pid "$(pgrep -n ingest)"
//
// Open loop at 700 requests/s (35k events/s), latency timed from each
// request's scheduled start: add -rate 700.
//
// With -brokers it instead produces the records ingest would publish for
// the same bodies straight to Kafka with ingest's writer configuration:
// the producer ceiling. Its CPU and peak RSS are this process's own.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

type options struct {
	url, token        string
	concurrency       int
	duration, warmup  time.Duration
	timeout           time.Duration
	rate              float64
	batch, bodies     int
	eventBytes        int
	seed              uint64
	appID, orgID      string
	pid               int
	json              bool
	brokers, topic    string
	partitions        int
	compression       string
	kafkaBatchTimeout time.Duration
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8081/cms/app/events", "ingest events endpoint")
	fs.StringVar(&o.token, "token", os.Getenv("INGEST_TOKEN"), "app token (default $INGEST_TOKEN)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "workers in a closed loop; most outstanding requests in an open loop")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured run length")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured run before the measured one")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "limit for one request")
	fs.Float64Var(&o.rate, "rate", 0, "open loop at this many requests per second; 0 runs a closed loop")
	fs.IntVar(&o.batch, "batch", loadgen.DefaultBatch, "events per request")
	fs.IntVar(&o.eventBytes, "event-bytes", 0, "make each event about this large with a knowledge-base result, as a runtime's knowledge-base turns are (0: about 1 KB)")
	fs.IntVar(&o.bodies, "bodies", loadgen.DefaultBodies, "distinct request bodies")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated bodies")
	fs.StringVar(&o.appID, "app-id", "", "appId written into events (empty: left out, ingest fills it from the token)")
	fs.StringVar(&o.orgID, "org-id", "demo-org", "organization of the records in -brokers mode")
	fs.IntVar(&o.pid, "pid", 0, "process whose CPU time and peak RSS to report (e.g. ingest's)")
	fs.BoolVar(&o.json, "json", false, "also print the result as JSON on stdout")
	fs.StringVar(&o.brokers, "brokers", "", "comma-separated Kafka brokers: produce straight to Kafka (the ceiling) instead of calling ingest")
	fs.StringVar(&o.topic, "topic", "cms.events", "topic for -brokers mode")
	fs.IntVar(&o.partitions, "topic-partitions", 6, "partitions of -topic when -brokers mode creates it")
	fs.StringVar(&o.compression, "kafka-compression", kafka.DefaultCompression, "codec for -brokers mode, as ingest's KAFKA_COMPRESSION")
	fs.DurationVar(&o.kafkaBatchTimeout, "kafka-batch-timeout", kafka.DefaultBatchTimeout, "batch timeout for -brokers mode, as ingest's KAFKA_BATCH_TIMEOUT")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		log.Error("load run failed", "err", err)
		os.Exit(1)
	}
	if o.json {
		fmt.Fprintln(os.Stderr, summary(res))
		enc := json.NewEncoder(os.Stdout)
		if err := enc.Encode(res); err != nil {
			log.Error("write JSON", "err", err)
			os.Exit(1)
		}
	} else {
		fmt.Println(summary(res))
	}
	if res.Report.Failed > 0 || res.Report.RejectedEvents > 0 {
		os.Exit(2)
	}
}

func run(ctx context.Context, o options) (*loadgen.Result, error) {
	if o.concurrency <= 0 || o.duration <= 0 || o.batch <= 0 {
		return nil, errors.New("-concurrency, -duration and -batch must be positive")
	}
	bodies := loadgen.Bodies(loadgen.BodyOptions{Count: o.bodies, Events: o.batch, AppID: o.appID, Seed: o.seed, EventBytes: o.eventBytes})
	if o.brokers != "" {
		return runCeiling(ctx, o, bodies)
	}
	if o.token == "" {
		return nil, errors.New("no token: pass -token or set INGEST_TOKEN")
	}
	cfg := loadgen.HTTPConfig{
		URL: o.url, Token: o.token, Bodies: bodies, EventsPerBody: o.batch,
		Concurrency: o.concurrency, Rate: o.rate, Timeout: o.timeout,
		Client: loadgen.NewClient(o.concurrency),
	}
	if o.warmup > 0 {
		w := cfg
		w.Duration, w.Rate = o.warmup, 0
		if _, err := loadgen.RunHTTP(ctx, w); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	cfg.Duration = o.duration
	return measure(o.pid, func() (*loadgen.Report, error) { return loadgen.RunHTTP(ctx, cfg) })
}

func runCeiling(ctx context.Context, o options, bodies [][]byte) (*loadgen.Result, error) {
	app := o.appID
	if app == "" {
		app = "demo-app"
	}
	recs, err := loadgen.Records(bodies, event.Meta{AppID: app, OrganizationID: o.orgID, ReceivedAt: time.Now()})
	if err != nil {
		return nil, err
	}
	brokers := strings.Split(o.brokers, ",")
	cluster := kafka.Cluster{Brokers: brokers}
	if err := cluster.EnsureTopics(ctx, []kafka.TopicSpec{{Name: o.topic, Partitions: o.partitions, ReplicationFactor: 1}}); err != nil {
		return nil, err
	}
	c, err := loadgen.NewCeiling(loadgen.CeilingConfig{
		Kafka: cluster,
		Producer: kafka.ProducerConfig{
			BatchTimeout: o.kafkaBatchTimeout,
			Compression:  o.compression,
		},
		Topic: o.topic, Records: recs, Concurrency: o.concurrency,
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if o.warmup > 0 {
		r, err := c.Run(ctx, o.warmup)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if r.OK == 0 {
			return nil, fmt.Errorf("warm-up wrote nothing: %v", r.FailedOutcomes())
		}
	}
	return measure(o.pid, func() (*loadgen.Report, error) { return c.Run(ctx, o.duration) })
}

// measure runs fn while metering this process and, when pid is set, that one.
func measure(pid int, fn func() (*loadgen.Report, error)) (*loadgen.Result, error) {
	self, err := loadgen.StartMeter(os.Getpid())
	if err != nil {
		return nil, err
	}
	var target *loadgen.Meter
	if pid > 0 {
		if target, err = loadgen.StartMeter(pid); err != nil {
			return nil, err
		}
	}
	r, err := fn()
	if err != nil {
		return nil, err
	}
	res := &loadgen.Result{Report: r}
	if res.Self, err = self.Stop(r.Events); err != nil {
		return nil, err
	}
	if target != nil {
		if res.Target, err = target.Stop(r.Events); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func summary(res *loadgen.Result) string {
	s := res.Report.String()
	if u := res.Target; u != nil {
		s += fmt.Sprintf("; pid %d: %.2f CPU s per 100k events, peak RSS %d MiB", u.PID, u.CPUPer100k, u.PeakRSS>>20)
	}
	if u := res.Self; u != nil {
		s += fmt.Sprintf("; loadgen: %.2f CPU s per 100k events, peak RSS %d MiB", u.CPUPer100k, u.PeakRSS>>20)
	}
	return s
}
