// Command consumerbench measures the consumer on this machine:
//
//	go run ./dev/consumerbench [-events 1000000] [-freshness 30s]
//
// It pre-fills the events topic of a local broker with REQUEST_RESPONSE
// envelopes (as ingest writes them), runs the consumer binary until all of
// them are rows in a private ClickHouse, and reports rows/s, CPU seconds
// per 100k rows and peak RSS of the consumer. In the same run it measures
// the ceiling: clickhouse-go inserting the same rows, already decoded,
// straight from memory, in batches of the consumer's size and with its
// String columns sized as the consumer sizes them; both phases report CPU
// seconds per 100k rows. Last it runs ingest and the consumer together at a
// steady 10k events/s (-rate, in requests of -per-request events) and
// reports the time from ingest's 200 to the row being queryable, and the
// CPU of ingest and of the consumer per event meanwhile. With -cluster it
// then drains the topic again, side by side, into one server and into a
// local 2×2 ClickHouse cluster with ZooKeeper, and reports rows/s and the
// CPU of the consumer and of the servers for both.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/consumer"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
)

// The goals the report is held against.
const (
	goalRowsPerSec   = 120000
	goalCeilingRatio = 0.75
	goalCPUPer100k   = 0.8
	goalFreshnessP99 = 2 * time.Second
)

func main() {
	events := flag.Int("events", 1_000_000, "envelopes to pre-fill the topic with (a multiple of 10,000)")
	batchRows := flag.Int("batch-rows", 0, "BATCH_ROWS of the consumer (0: its default)")
	freshness := flag.Duration("freshness", 30*time.Second, "length of the steady-load freshness phase (0 skips it)")
	rate := flag.Int("rate", 10000, "events per second in the freshness phase")
	perRequest := flag.Int("per-request", 50, "events per ingest request in the freshness phase")
	var consumerEnv envList
	flag.Var(&consumerEnv, "consumer-env", "NAME=VALUE for the consumer of the freshness phase (repeat for more), such as FLUSH_INTERVAL=2s")
	consumerBin := flag.String("consumer-bin", "", "consumer binary for the freshness phase (empty: this tree's), to compare builds")
	profile := flag.String("consumer-profile", "", "write a CPU profile of the consumer over the freshness phase's load to this file")
	cluster := flag.Bool("cluster", false, "also drain the topic into one server and into a local 2×2 ClickHouse cluster (with ZooKeeper), side by side")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *events, *batchRows, *freshness, load{rate: *rate, perRequest: *perRequest, profile: *profile, env: consumerEnv, bin: *consumerBin}, *cluster); err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

type rig struct {
	dir, bin string
	broker   *devbroker.Broker
	ch       *devclickhouse.Server
	log      *slog.Logger
	columns  *chstore.StringColumns
}

// load is the freshness phase's steady load.
type load struct {
	rate       int      // events per second
	perRequest int      // events per ingest request
	profile    string   // CPU profile of the consumer to write
	env        []string // extra environment of the consumer
	bin        string   // the consumer binary, if not this tree's
}

// envList is a repeated NAME=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want NAME=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

func run(ctx context.Context, log *slog.Logger, events, batchRows int, freshness time.Duration, steady load, cluster bool) error {
	if events <= 0 || events%10000 != 0 {
		return errors.New("-events must be a positive multiple of 10,000")
	}
	if steady.rate <= 0 || steady.perRequest <= 0 || steady.perRequest > steady.rate {
		return errors.New("-rate and -per-request must be positive, with -per-request at most -rate")
	}
	dir, err := os.MkdirTemp("", "cms-consumerbench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The ceiling's inserts are sized as the consumer's are.
	r := &rig{dir: dir, bin: filepath.Join(dir, "bin"), log: log, columns: chstore.InstallStringColumns()}
	if err := devclickhouse.Install(ctx, os.Stderr); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", r.bin+"/", "./cmd/consumer", "./cmd/ingest", "./cmd/api")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	brokerBin, err := devbroker.Build(ctx, r.bin)
	if err != nil {
		return err
	}
	if r.broker, err = devbroker.Start(ctx, brokerBin, devbroker.Options{}); err != nil {
		return err
	}
	defer r.broker.Stop()
	if err := os.MkdirAll(filepath.Join(dir, "ch"), 0o755); err != nil {
		return err
	}
	if r.ch, err = devclickhouse.Start(ctx, devclickhouse.Options{Dir: filepath.Join(dir, "ch")}); err != nil {
		return err
	}
	defer r.ch.Stop()

	if batchRows <= 0 {
		batchRows = consumer.DefaultBatchRows
	}
	log.Info("pre-filling the topic", "events", events)
	batches, err := r.prefill(ctx, events, batchRows)
	if err != nil {
		return err
	}

	log.Info("ceiling: clickhouse-go inserting decoded rows from memory")
	ceiling, err := r.ceiling(ctx, batches)
	if err != nil {
		return err
	}
	batches = nil

	log.Info("consumer: draining the topic into ClickHouse")
	cons, err := r.consume(ctx, events, batchRows)
	if err != nil {
		return err
	}

	var fresh *steadyPhase
	if freshness > 0 {
		log.Info("freshness at steady load", "events_per_sec", steady.rate, "events_per_request", steady.perRequest, "for", freshness)
		if fresh, err = r.freshness(ctx, freshness, steady); err != nil {
			return err
		}
	}
	report(events, ceiling, cons, fresh)
	if cluster {
		return r.compareCluster(ctx, events, batchRows)
	}
	return nil
}

// prefill writes n envelopes to the events topic and returns them decoded,
// in batches of the consumer's size, for the ceiling.
func (r *rig) prefill(ctx context.Context, n, batchRows int) ([]*chstore.EventBatch, error) {
	cluster := kafka.Cluster{Brokers: []string{r.broker.Addr()}}
	if err := cluster.EnsureTopics(ctx, []kafka.TopicSpec{{Name: "cms.events", Partitions: 6, ReplicationFactor: 1}}); err != nil {
		return nil, err
	}
	w, err := cluster.NewWriter(kafka.ProducerConfig{}, "cms.events")
	if err != nil {
		return nil, err
	}
	defer w.Close()
	bodies := loadgen.Bodies(loadgen.BodyOptions{AppID: "demo-app", Count: 200})
	v := event.NewValidator(event.Limits{})
	var dec columns.Decoder
	var batches []*chstore.EventBatch
	decoded := 0
	for round := 0; decoded < n; round++ {
		var recs []event.Record
		for i, body := range bodies {
			res, err := v.ProcessBatch(body, event.Meta{AppID: "demo-app", OrganizationID: "demo-org", ReceivedAt: time.Now(),
				IDSeed: "bench-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)})
			if err != nil {
				return nil, fmt.Errorf("build records: %w", err)
			}
			if len(res.Errors) > 0 {
				return nil, fmt.Errorf("build records: %v", res.Errors)
			}
			for _, m := range res.Accepted {
				if decoded%batchRows == 0 {
					batches = append(batches, new(chstore.EventBatch))
				}
				if _, err := dec.Decode(m.Value, batches[len(batches)-1]); err != nil {
					return nil, err
				}
				decoded++
				recs = append(recs, m)
			}
		}
		if err := w.Write(ctx, recs); err != nil {
			return nil, fmt.Errorf("pre-fill the topic: %w", err)
		}
	}
	return batches, nil
}

type phase struct {
	rows    int
	elapsed time.Duration
	usage   *loadgen.Usage
}

func (p phase) rate() float64 { return float64(p.rows) / p.elapsed.Seconds() }

func (r *rig) store(ctx context.Context, db string) (*chstore.Store, error) {
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{r.ch.Addr()}, Database: db, StringColumns: r.columns})
	if err != nil {
		return nil, err
	}
	if _, err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ceiling inserts the decoded batches into a database of its own, timing
// only the inserts.
func (r *rig) ceiling(ctx context.Context, batches []*chstore.EventBatch) (phase, error) {
	s, err := r.store(ctx, "ceiling")
	if err != nil {
		return phase{}, err
	}
	defer s.Close()
	self, err := loadgen.StartMeter(os.Getpid())
	if err != nil {
		return phase{}, err
	}
	start := time.Now()
	rows := 0
	for _, b := range batches {
		if err := s.InsertEvents(ctx, b); err != nil {
			return phase{}, err
		}
		rows += b.Len()
	}
	elapsed := time.Since(start)
	u, err := self.Stop(int64(rows))
	return phase{rows: rows, elapsed: elapsed, usage: u}, err
}

// service starts one of the built binaries with env and waits until its
// readiness endpoint answers 200.
func (r *rig) service(ctx context.Context, name string, env ...string) (*childproc.Proc, string, error) {
	return r.serviceBin(ctx, name, "", env...)
}

// serviceBin is service with the binary at bin, or the built one if bin
// is empty.
func (r *rig) serviceBin(ctx context.Context, name, bin string, env ...string) (*childproc.Proc, string, error) {
	port, err := devbroker.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if bin == "" {
		bin = filepath.Join(r.bin, name)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append(env, strings.ToUpper(name)+"_ADDR="+addr, "KAFKA_BROKERS="+r.broker.Addr())...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	proc, err := childproc.Start(name, cmd)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return proc, "http://" + addr, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = proc.Stop(syscall.SIGKILL, 10*time.Second)
			return nil, "", fmt.Errorf("%s not ready after 60s:\n%s", name, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stopCmd(p *childproc.Proc) { _ = p.Stop(syscall.SIGTERM, 20*time.Second) }

// consume runs the consumer until every pre-filled event is a row, and
// measures it from its first inserted row to the last.
func (r *rig) consume(ctx context.Context, n, batchRows int) (phase, error) {
	s, err := r.store(ctx, "default")
	if err != nil {
		return phase{}, err
	}
	defer s.Close()
	env := []string{"CLICKHOUSE_ADDR=" + r.ch.Addr(), "BATCH_ROWS=" + strconv.Itoa(batchRows)}
	cmd, _, err := r.service(ctx, "consumer", env...)
	if err != nil {
		return phase{}, err
	}
	defer stopCmd(cmd)
	count := func() uint64 {
		var c uint64
		_ = s.Conn().QueryRow(s.Context(ctx), "SELECT count() FROM events").Scan(&c)
		return c
	}
	// Measured from the first rows seen, so that start-up and the group
	// join do not count; if everything lands at once, from readiness.
	readyMeter, err := loadgen.StartMeter(cmd.PID())
	if err != nil {
		return phase{}, err
	}
	readyAt := time.Now()
	var first uint64
	var start time.Time
	var meter *loadgen.Meter
	for {
		c := count()
		if meter == nil && c >= uint64(n) {
			u, err := readyMeter.Stop(int64(c))
			return phase{rows: int(c), elapsed: time.Since(readyAt), usage: u}, err
		}
		if meter == nil && c > 0 {
			first, start = c, time.Now()
			if meter, err = loadgen.StartMeter(cmd.PID()); err != nil {
				return phase{}, err
			}
		}
		if c >= uint64(n) {
			elapsed := time.Since(start)
			u, err := meter.Stop(int64(c - first))
			return phase{rows: int(c - first), elapsed: elapsed, usage: u}, err
		}
		if ctx.Err() != nil {
			return phase{}, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// steadyPhase is what the freshness phase measured.
type steadyPhase struct {
	load
	latency loadgen.Latency
	// consumer is the consumer's CPU from the first request to the last
	// row being queryable, for every event sent.
	consumer *loadgen.Usage
	// ingest is ingest's CPU from the first request to the last answer.
	ingest *loadgen.Usage
	// sent is the rate the load was sent at, in events per second: less
	// than asked when ingest or the generator cannot keep up.
	sent float64
}

// freshness runs ingest and the consumer together at a steady rate and
// measures, per request, the time from ingest's 200 to all its events
// being queryable, and the consumer's CPU per row meanwhile.
func (r *rig) freshness(ctx context.Context, d time.Duration, steady load) (*steadyPhase, error) {
	db := filepath.Join(r.dir, "cms.db")
	out, err := exec.CommandContext(ctx, filepath.Join(r.bin, "api"), "-content-db", db, "demo", "--quiet").Output()
	if err != nil {
		return nil, fmt.Errorf("create a token: %w", err)
	}
	token := strings.TrimSpace(string(out))
	// Its own topic and database, so the pre-filled events play no part.
	ingest, ingestURL, err := r.service(ctx, "ingest", "CONTENT_DB="+db, "RATE_LIMIT_RPS=0",
		"EVENT_RATE_PER_TOKEN=0", "EVENT_RATE_PER_APP=0", "EVENT_RATE_PER_ORG=0", "EVENTS_TOPIC=fresh.events")
	if err != nil {
		return nil, err
	}
	defer stopCmd(ingest)
	opPort, err := devbroker.FreePort()
	if err != nil {
		return nil, err
	}
	operator := "http://127.0.0.1:" + strconv.Itoa(opPort)
	env := append([]string{"CLICKHOUSE_ADDR=" + r.ch.Addr(), "EVENTS_TOPIC=fresh.events", "CLICKHOUSE_DATABASE=fresh",
		"OPERATOR_ADDR=127.0.0.1:" + strconv.Itoa(opPort)}, steady.env...)
	cons, _, err := r.serviceBin(ctx, "consumer", steady.bin, env...)
	if err != nil {
		return nil, err
	}
	defer stopCmd(cons)
	s, err := r.store(ctx, "fresh")
	if err != nil {
		return nil, err
	}
	defer s.Close()

	perReq, rate := steady.perRequest, steady.rate
	template := loadgen.Bodies(loadgen.BodyOptions{AppID: "demo-app", Count: 1, Events: perReq})[0]
	reqs := int(d.Seconds() * float64(rate) / float64(perReq))
	interval := time.Duration(float64(time.Second) * float64(perReq) / float64(rate))
	acked := make([]time.Time, reqs)
	visible := make([]time.Time, reqs)
	client := loadgen.NewClient(32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	sem := make(chan struct{}, 64)
	// The consumer has been idle since it was ready; it is measured from
	// the first request to the last row being queryable.
	meter, err := loadgen.StartMeter(cons.PID())
	if err != nil {
		return nil, err
	}
	ingestMeter, err := loadgen.StartMeter(ingest.PID())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	profiled := make(chan error, 1)
	if steady.profile != "" {
		go func() { profiled <- r.profile(ctx, operator, d, steady.profile) }()
	} else {
		profiled <- nil
	}
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		seen := 0
		for seen < reqs && time.Since(start) < d+30*time.Second {
			rows, err := s.Conn().Query(s.Context(ctx), "SELECT toUInt32OrZero(splitByChar('-', event_id)[2]) AS r FROM fresh.events "+
				"WHERE event_id LIKE 'f-%' GROUP BY r HAVING count() >= "+strconv.Itoa(perReq))
			if err == nil {
				now := time.Now()
				for rows.Next() {
					var req uint32
					if rows.Scan(&req) == nil && int(req) < reqs && visible[req].IsZero() {
						visible[req] = now
						seen++
					}
				}
				rows.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for i := range reqs {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		body := template
		for j := range perReq {
			body = bytes.Replace(body, []byte(`{"type":"AnalyticsEvent"`), []byte(`{"eventId":"f-`+strconv.Itoa(i)+`-`+strconv.Itoa(j)+`","type":"AnalyticsEvent"`), 1)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, ingestURL+"/cms/app/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			outcome := ""
			if err != nil {
				outcome = err.Error()
			} else {
				// Read to its end, so that the connection is used again:
				// a connection per request would cost ingest more than
				// the request.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				outcome = strconv.Itoa(resp.StatusCode)
				if resp.StatusCode == 200 {
					acked[i] = time.Now()
				}
			}
			mu.Lock()
			outcomes[outcome]++
			mu.Unlock()
		})
	}
	wg.Wait()
	ingestUsage, err := ingestMeter.Stop(int64(reqs * perReq))
	if err != nil {
		return nil, err
	}
	sent := time.Since(start)
	sentRate := float64(reqs*perReq) / sent.Seconds()
	r.log.Info("load sent", "requests", reqs, "in", sent.Round(time.Millisecond).String(), "events_per_sec", int(sentRate))
	<-pollDone
	r.log.Info("load queryable", "in", time.Since(start).Round(time.Millisecond).String())
	usage, err := meter.Stop(int64(reqs * perReq))
	if err != nil {
		return nil, err
	}
	if err := <-profiled; err != nil {
		return nil, err
	}
	var lat []time.Duration
	missing := 0
	for i := range reqs {
		switch {
		case acked[i].IsZero():
			missing++
		case visible[i].IsZero():
			missing++
		default:
			lat = append(lat, max(0, visible[i].Sub(acked[i])))
		}
	}
	if missing > 0 {
		return nil, fmt.Errorf("%d of %d requests were not acknowledged or not seen in ClickHouse (answers: %v)", missing, reqs, outcomes)
	}
	return &steadyPhase{load: steady, latency: loadgen.Summarize(lat), consumer: usage, ingest: ingestUsage, sent: sentRate}, nil
}

// profile writes a CPU profile of the service at operator, over d, to path.
func (r *rig) profile(ctx context.Context, operator string, d time.Duration, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, operator+"/debug/pprof/profile?seconds="+strconv.Itoa(int(d.Seconds())), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile the consumer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile the consumer: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile the consumer: %w", err)
	}
	return f.Close()
}

func report(events int, ceiling, cons phase, fresh *steadyPhase) {
	ratio := cons.rate() / ceiling.rate()
	fmt.Printf("\n%d REQUEST_RESPONSE events pre-filled on 6 partitions; ClickHouse 18.16 on loopback.\n\n", events)
	fmt.Println("| | rows/s | CPU s / 100k rows | peak RSS | consumer / ceiling |")
	fmt.Println("|---|---:|---:|---:|---:|")
	fmt.Printf("| consumer (kafka-go group reader, decode, clickhouse-go) | %.0f | %.2f | %d MiB | %.0f%% |\n",
		cons.rate(), cons.usage.CPUPer100k, cons.usage.PeakRSS>>20, 100*ratio)
	fmt.Printf("| ceiling: clickhouse-go inserting decoded rows from memory | %.0f | %.2f (bench process) | %d MiB | 100%% |\n",
		ceiling.rate(), ceiling.usage.CPUPer100k, ceiling.usage.PeakRSS>>20)
	if fresh != nil {
		l := fresh.latency
		fmt.Printf("\nFreshness at %d events/s (ingest's 200 to queryable, per request of %d events, polled every 50 ms): p50 %s, p99 %s, max %s over %d requests.\n",
			fresh.rate, fresh.perRequest, l.P50.Round(time.Millisecond), l.P99.Round(time.Millisecond), l.Max.Round(time.Millisecond), l.Count)
		fmt.Printf("Load sent at %.0f events/s (%d asked). Consumer meanwhile (first request to last row queryable): %.2f CPU s per 100k rows (%.1f CPU s), peak RSS %d MiB.\n",
			fresh.sent, fresh.rate, fresh.consumer.CPUPer100k, fresh.consumer.CPUSeconds, fresh.consumer.PeakRSS>>20)
		fmt.Printf("Ingest meanwhile (first request to last answer): %.2f CPU s per 100k events; ingest and consumer together %.2f.\n",
			fresh.ingest.CPUPer100k, fresh.ingest.CPUPer100k+fresh.consumer.CPUPer100k)
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("\n- at least %d rows/s: %s (%.0f)\n", goalRowsPerSec, met(cons.rate() >= goalRowsPerSec), cons.rate())
	fmt.Printf("- at least %.0f%% of the ceiling: %s (%.0f%%)\n", 100*goalCeilingRatio, met(ratio >= goalCeilingRatio), 100*ratio)
	fmt.Printf("- at most %.1f CPU s per 100k rows: %s (%.2f; the ceiling's inserts alone took %.2f)\n", goalCPUPer100k,
		met(cons.usage.CPUPer100k <= goalCPUPer100k), cons.usage.CPUPer100k, ceiling.usage.CPUPer100k)
	if fresh != nil {
		fmt.Printf("- freshness p99 under %s: %s (%s)\n", goalFreshnessP99, met(fresh.latency.P99 < goalFreshnessP99), fresh.latency.P99.Round(time.Millisecond))
		fmt.Printf("- at most %.1f CPU s per 100k rows at %.0f events/s: %s (%.2f)\n", goalCPUPer100k, fresh.sent,
			met(fresh.consumer.CPUPer100k <= goalCPUPer100k), fresh.consumer.CPUPer100k)
	}
}
