// Command bench measures the ingest service against its producer ceiling
// on this machine with the local broker:
//
//	go run ./dev/bench [-duration 20s] [-runs 3] [-concurrency 32]
//
// It builds cmd/ingest, cmd/api, the local broker and the loadgen command
// into a temporary directory, starts the broker, creates a content
// database with a demo app token, starts ingest on a free loopback port
// with rate limiting off, and then, for each run:
//
//   - ingest max: a closed loop of -concurrency workers PUTting batches of
//     50 REQUEST_RESPONSE events (~1 KB each) for -duration;
//   - ceiling: the same records, built by the same validator, produced
//     straight to the broker by kafka-go with ingest's writer configuration,
//     50 records per WriteMessages call from -concurrency goroutines. It
//     runs in a separate loadgen process so that its CPU time and peak RSS
//     are measured like ingest's, from /proc.
//
// Finally it runs an open loop at half the median ingest maximum, timing
// each request from its scheduled start, and prints a Markdown table of
// medians with the goals met or not. KAFKA_LINGER, KAFKA_MAX_IN_FLIGHT,
// KAFKA_COMPRESSION, TOPIC_PARTITIONS and MAX_IN_FLIGHT in the environment
// reach ingest; KAFKA_BATCH_TIMEOUT (kafka-go's batch timeout),
// KAFKA_COMPRESSION and TOPIC_PARTITIONS reach the ceiling, and
// KAFKA_BATCH_TIMEOUT ingest too, as the former name of KAFKA_LINGER.
// INGEST_OPERATOR_ADDR gives ingest an operator address, whose
// /debug/pprof profiles it under the load.
//
// -sweep 8,16,32,64 instead runs one ingest max and one ceiling per
// concurrency, to choose -concurrency.
//
// -shapes 1x1k,5x1k,50x1k,1x20k,5x20k,50x20k instead measures requests of
// those shapes (events per request × each event's size; 20k events carry
// a knowledge-base result, as a runtime's knowledge-base turns do): at
// each, ingest max called directly, the same through api gateway (with
// api serve as its other upstream), and the ceiling producing the same
// records with the same batching, -runs times, then a table of medians
// with the gateway's CPU beside ingest's (shapes.go). With -floors it also
// measures, at each shape, dev/httpfloor's net/http server that only reads
// and answers, and its stock httputil.ReverseProxy in front of ingest: the
// least the same HTTP stack costs for the same requests. With -shape-rate
// the HTTP paths run as an open loop at that many events per second, and
// the ceiling, a closed loop, is left out.
//
// -watchers 10 instead measures what people watching the app's events
// live cost ingest: it starts api serve on the same broker too, and runs
// ingest max -runs times without watchers and -runs times with that many
// streams of GET /cms/app/events/live open on the app, alternating, then
// prints the medians, their ratio and the api's CPU per event it read and
// per event it streamed (watchers/main.go).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
)

// The performance goals the benchmark reports against.
const (
	goalEventsPerSec  = 75000
	goalCPUPer100k    = 1.6
	goalCeilingRatio  = 0.60
	goalHalfLoadP99   = 50 * time.Millisecond
	demoApp           = "demo-app"
	ceilingTopic      = "bench.ceiling"
	defaultPartitions = 6
)

type options struct {
	duration    time.Duration
	warmup      time.Duration
	runs        int
	concurrency int
	outstanding int
	bodies      int
	seed        uint64
	sweep       string
	keep        bool
	watchers    int
	shapes      string
	floors      bool
	shapeRate   float64
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var o options
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of each measured phase")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured load before the first run")
	flag.IntVar(&o.runs, "runs", 3, "runs of ingest max and ceiling; the table shows medians")
	flag.IntVar(&o.concurrency, "concurrency", 32, "closed-loop workers and ceiling goroutines")
	flag.IntVar(&o.outstanding, "half-load-outstanding", 0, "most requests outstanding in the half-load open loop (0: 4 x -concurrency)")
	flag.IntVar(&o.bodies, "bodies", loadgen.DefaultBodies, "distinct request bodies")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the generated bodies")
	flag.StringVar(&o.sweep, "sweep", "", "comma-separated concurrencies: run ingest max and ceiling once at each instead of the benchmark")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (binaries, logs, database)")
	flag.IntVar(&o.watchers, "watchers", 0, "instead of the benchmark, compare ingest max without and with this many live watchers of the app (api serve reading the topics)")
	flag.StringVar(&o.shapes, "shapes", "", "instead of the benchmark, measure these request shapes, EVENTSxSIZE comma-separated (e.g. 1x1k,5x1k,50x1k,1x20k,5x20k,50x20k): ingest direct, through the gateway and the ceiling at each")
	flag.BoolVar(&o.floors, "floors", false, "with -shapes, also measure at each shape the least net/http costs: a server that only reads and answers, and a stock httputil.ReverseProxy in front of ingest (dev/httpfloor)")
	flag.Float64Var(&o.shapeRate, "shape-rate", 0, "with -shapes, send this many events per second in an open loop (at most -half-load-outstanding requests outstanding) instead of a closed loop, and skip the ceiling: the cost per request at a deployment's load rather than at saturation")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, o); err != nil {
		if ctx.Err() != nil {
			log.Info("benchmark interrupted; everything it started is stopped")
			os.Exit(130)
		}
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// stack is what the benchmark started; close stops it in reverse order.
type stack struct {
	log    *slog.Logger
	dir    string
	keep   bool
	bins   map[string]string
	broker *devbroker.Broker
	// children are the processes started after the broker (ingest, and
	// for some runs the api, the gateway and dev/httpfloor), in order.
	children  []*child
	ingest    *child
	ingestLog string
	token     string
	env       []string // ingest settings from the environment that the ceiling mirrors
	// api serves the live view of events in -watchers runs, and is the
	// gateway's other upstream in -shapes runs.
	api             *child
	managementToken string
	// gateway fronts ingest and the api in -shapes runs.
	gateway *child
}

// child is an HTTP service the stack started; done is closed when it
// exited.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	url  string
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// launch starts cmd, which dies with the benchmark even if the benchmark
// is killed, and waits up to a minute for its /readyz at url to answer.
func (s *stack) launch(ctx context.Context, what string, cmd *exec.Cmd, url string, logAttrs ...any) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{}), url: url}
	s.children = append(s.children, c)
	go func() { _ = cmd.Wait(); close(c.done) }()
	if err := waitHTTPReady(ctx, what, url+"/readyz", c.done, 60*time.Second); err != nil {
		return c, err
	}
	s.log.Info(what+" ready", append([]any{"url", url, "pid", cmd.Process.Pid}, logAttrs...)...)
	return c, nil
}

func run(ctx context.Context, log *slog.Logger, o options) (err error) {
	if o.runs <= 0 || o.concurrency <= 0 || o.duration <= 0 {
		return errors.New("-runs, -concurrency and -duration must be positive")
	}
	if o.shapes == "" && (o.floors || o.shapeRate != 0) {
		return errors.New("-floors and -shape-rate measure -shapes: name the shapes")
	}
	if o.shapeRate < 0 {
		return errors.New("-shape-rate must be positive, or 0 for a closed loop")
	}
	var shapes []shape
	if o.shapes != "" {
		if shapes, err = parseShapes(o.shapes); err != nil {
			return err
		}
	}
	var ingestEnv []string
	if o.shapes != "" {
		// One app sends everything here. Its share of the body memory (a
		// quarter of MAX_BODY_MEMORY) would refuse a third of the 1 MB
		// requests of 50 × 20 KB with 429 and measure admission, not
		// ingest; the shares are the whole budget instead. So are the
		// shares of the slots: an open loop's bursts pass a quarter of
		// MAX_IN_FLIGHT.
		for _, k := range []string{"MAX_BODY_MEMORY_PER_APP", "MAX_BODY_MEMORY_PER_TOKEN", "MAX_BODY_MEMORY_PER_ORG"} {
			ingestEnv = append(ingestEnv, k+"="+strconv.Itoa(ingest.DefaultMaxBodyMemory))
		}
		for _, k := range []string{"MAX_IN_FLIGHT_PER_APP", "MAX_IN_FLIGHT_PER_TOKEN", "MAX_IN_FLIGHT_PER_ORG"} {
			ingestEnv = append(ingestEnv, k+"="+strconv.Itoa(ingest.DefaultMaxInFlight))
		}
	}
	s, err := start(ctx, log, o.keep, o.watchers, ingestEnv)
	defer s.close()
	defer func() {
		if err != nil && ctx.Err() == nil {
			s.dumpIngestLog()
		}
	}()
	if err != nil {
		return err
	}

	b := &bench{s: s, o: o, log: log, shapes: shapes}
	b.bodies = loadgen.Bodies(loadgen.BodyOptions{Count: o.bodies, AppID: demoApp, Seed: o.seed})
	conc := []int{o.concurrency}
	if o.sweep != "" {
		if conc, err = parseInts(o.sweep); err != nil {
			return err
		}
	}
	b.client = loadgen.NewClient(max(slices.Max(conc), b.outstanding()))

	log.Info("warming up", "for", o.warmup)
	if o.warmup > 0 {
		if _, err := b.httpRun(ctx, "warm-up", conc[0], 0, o.warmup); err != nil {
			return err
		}
	}
	if o.sweep != "" {
		return b.sweep(ctx, conc)
	}
	if o.watchers > 0 {
		return b.watched(ctx)
	}
	if o.shapes != "" {
		return b.shaped(ctx)
	}
	return b.benchmark(ctx)
}

// start builds the binaries and brings up broker and ingest. The returned
// stack is never nil and must be closed, even with an error.
func start(ctx context.Context, log *slog.Logger, keep bool, watchers int, ingestEnv []string) (*stack, error) {
	s := &stack{log: log, keep: keep, bins: map[string]string{}}
	dir, err := os.MkdirTemp("", "cms-bench-")
	if err != nil {
		return s, fmt.Errorf("create temporary directory: %w", err)
	}
	s.dir = dir
	root, err := moduleRoot(ctx)
	if err != nil {
		return s, err
	}
	log.Info("building", "dir", dir)
	for name, pkg := range map[string]string{"ingest": "./cmd/ingest", "api": "./cmd/api", "loadgen": "./dev/loadgen", "httpfloor": "./dev/httpfloor"} {
		bin := filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return s, fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
		s.bins[name] = bin
	}
	if s.bins["broker"], err = devbroker.Build(ctx, dir); err != nil {
		return s, err
	}

	if s.broker, err = devbroker.Start(ctx, s.bins["broker"], devbroker.Options{}); err != nil {
		return s, err
	}
	log.Info("broker started", "addr", s.broker.Addr(), "pid", s.broker.PID())

	db := filepath.Join(dir, "content.db")
	out, err := exec.CommandContext(ctx, s.bins["api"], "-content-db", db, "demo", "--quiet").Output()
	if err != nil {
		return s, fmt.Errorf("create demo token with api demo: %w%s", err, stderrOf(err))
	}
	if s.token = lastLine(out); s.token == "" {
		return s, errors.New("create demo token: api demo printed nothing")
	}

	port, err := devbroker.FreePort()
	if err != nil {
		return s, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, k := range []string{"KAFKA_LINGER", "KAFKA_MAX_IN_FLIGHT", "KAFKA_BATCH_TIMEOUT", "KAFKA_COMPRESSION", "TOPIC_PARTITIONS"} {
		if v := os.Getenv(k); v != "" {
			s.env = append(s.env, k+"="+v)
		}
	}
	s.ingestLog = filepath.Join(dir, "ingest.log")
	logf, err := os.Create(s.ingestLog)
	if err != nil {
		return s, fmt.Errorf("create ingest log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bins["ingest"])
	// Later entries win, so these override the caller's environment.
	cmd.Env = append(os.Environ(),
		"INGEST_ADDR="+addr,
		"KAFKA_BROKERS="+s.broker.Addr(),
		"CONTENT_DB="+db,
		// The load comes from one token, past what a tenant may send.
		"RATE_LIMIT_RPS=0", "EVENT_RATE_PER_TOKEN=0", "EVENT_RATE_PER_APP=0", "EVENT_RATE_PER_ORG=0",
	)
	cmd.Env = append(cmd.Env, ingestEnv...)
	if op := os.Getenv("INGEST_OPERATOR_ADDR"); op != "" {
		// Ingest's own /debug/pprof, for profiling it under the load.
		cmd.Env = append(cmd.Env, "OPERATOR_ADDR="+op)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.ingest, err = s.launch(ctx, "ingest", cmd, "http://"+addr); err != nil {
		return s, err
	}
	if watchers > 0 {
		if err := s.startAPI(ctx, db, watchers); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *stack) dumpIngestLog() {
	if s.ingestLog == "" {
		return
	}
	data, err := os.ReadFile(s.ingestLog)
	if err != nil || len(data) == 0 {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	fmt.Fprintf(os.Stderr, "last lines of the ingest log:\n%s\n", strings.Join(lines[max(0, len(lines)-20):], "\n"))
}

func (s *stack) close() {
	for _, c := range slices.Backward(s.children) {
		c.stop()
	}
	if s.broker != nil {
		if err := s.broker.Stop(); err != nil {
			s.log.Warn("stop broker", "err", err)
		}
	}
	if s.dir == "" {
		return
	}
	if s.keep {
		s.log.Info("kept temporary directory", "dir", s.dir)
		return
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.log.Warn("remove temporary directory", "err", err)
	}
}

// stop ends the process with SIGTERM, and kills it after 15 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitHTTPReady polls url until it answers 200, what exits (done is
// closed) or limit passes.
func waitHTTPReady(ctx context.Context, what, url string, done <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready", what)
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", what, limit, err)
		}
	}
}

// bench runs the measurements.
type bench struct {
	s      *stack
	o      options
	log    *slog.Logger
	bodies [][]byte
	client *http.Client
	shapes []shape
}

func (b *bench) outstanding() int {
	if b.o.outstanding > 0 {
		return b.o.outstanding
	}
	return 4 * b.o.concurrency
}

// phase is one measured load run with the resource use of the processes
// that matter to it.
type phase struct {
	// what names proc: ingest or producer.
	what   string
	report *loadgen.Report
	// proc is ingest for HTTP runs, the producing loadgen for the ceiling.
	proc   *loadgen.Usage
	broker *loadgen.Usage
	// gen is the load generator's own use for HTTP runs.
	gen *loadgen.Usage
}

func (p *phase) String() string {
	s := p.report.String()
	if p.proc != nil {
		s += fmt.Sprintf("; %s %.2f CPU s/100k, peak RSS %d MiB", p.what, p.proc.CPUPer100k, p.proc.PeakRSS>>20)
	}
	if p.broker != nil {
		s += fmt.Sprintf("; broker %.2f CPU s/100k", p.broker.CPUPer100k)
	}
	if p.gen != nil {
		s += fmt.Sprintf("; load generator %.2f CPU s/100k", p.gen.CPUPer100k)
	}
	return s
}

// httpRun puts load on ingest: a closed loop when rate is 0, else an open
// loop at rate requests/s.
func (b *bench) httpRun(ctx context.Context, name string, conc int, rate float64, d time.Duration) (*phase, error) {
	meters, err := startMeters(b.s.ingest.pid(), b.s.broker.PID(), os.Getpid())
	if err != nil {
		return nil, err
	}
	r, err := loadgen.RunHTTP(ctx, loadgen.HTTPConfig{
		URL: b.s.ingest.url + "/cms/app/events", Token: b.s.token, Bodies: b.bodies,
		EventsPerBody: loadgen.DefaultBatch, Concurrency: conc, Duration: d, Rate: rate,
		Client: b.client,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &phase{what: "ingest", report: r}
	u, err := meters.stop(r.Events)
	if err != nil {
		return nil, err
	}
	p.proc, p.broker, p.gen = u[0], u[1], u[2]
	if err := checkReport(name, r); err != nil {
		return nil, err
	}
	fmt.Printf("%-28s %s\n", name+":", p)
	return p, nil
}

// ceilingRun runs the producer ceiling in a loadgen process; extra are
// more of loadgen's flags (the batch and event size of a shape).
func (b *bench) ceilingRun(ctx context.Context, name string, conc int, extra ...string) (*phase, error) {
	partitions := defaultPartitions
	if v := os.Getenv("TOPIC_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("TOPIC_PARTITIONS=%q: %w", v, err)
		}
		partitions = n
	}
	args := []string{
		"-brokers", b.s.broker.Addr(), "-topic", ceilingTopic, "-topic-partitions", strconv.Itoa(partitions),
		"-concurrency", strconv.Itoa(conc), "-duration", b.o.duration.String(), "-warmup", "1s",
		"-bodies", strconv.Itoa(b.o.bodies), "-seed", strconv.FormatUint(b.o.seed, 10), "-app-id", demoApp,
		"-pid", strconv.Itoa(b.s.broker.PID()), "-json",
	}
	args = append(args, extra...)
	if v := os.Getenv("KAFKA_BATCH_TIMEOUT"); v != "" {
		args = append(args, "-kafka-batch-timeout", v)
	}
	if v := os.Getenv("KAFKA_COMPRESSION"); v != "" {
		args = append(args, "-kafka-compression", v)
	}
	cmd := exec.CommandContext(ctx, b.s.bins["loadgen"], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// Exit status 2 means failed writes, which the report shows.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 2) {
		return nil, fmt.Errorf("%s: loadgen: %w\n%s", name, err, stderr.Bytes())
	}
	var res loadgen.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("%s: read loadgen result: %w\n%s%s", name, err, out, stderr.Bytes())
	}
	if res.Report == nil {
		return nil, fmt.Errorf("%s: loadgen result without a report\n%s%s", name, out, stderr.Bytes())
	}
	if err := b.deleteCeilingTopic(ctx); err != nil {
		b.log.Warn("delete ceiling topic", "err", err)
	}
	if err := checkReport(name, res.Report); err != nil {
		return nil, err
	}
	p := &phase{what: "producer", report: res.Report, proc: res.Self, broker: res.Target}
	fmt.Printf("%-28s %s\n", name+":", p)
	return p, nil
}

// deleteCeilingTopic frees the broker's memory between runs; the broker
// keeps every record in memory and the ceiling writes the most.
func (b *bench) deleteCeilingTopic(ctx context.Context) error {
	c := &kafka.Client{Addr: kafka.TCP(b.s.broker.Addr()), Timeout: 10 * time.Second}
	resp, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{ceilingTopic}})
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", ceilingTopic, err)
	}
	if err := resp.Errors[ceilingTopic]; err != nil {
		return fmt.Errorf("delete topic %s: %w", ceilingTopic, err)
	}
	return nil
}

// checkReport fails a run that did nothing and warns about failures.
func checkReport(name string, r *loadgen.Report) error {
	if r.OK == 0 {
		return fmt.Errorf("%s: no request succeeded: %v", name, r.Outcomes)
	}
	if r.Failed > 0 {
		fmt.Printf("%-28s WARNING %d of %d requests failed: %v\n", name+":", r.Failed, r.Requests, r.FailedOutcomes())
	}
	if r.RejectedEvents > 0 {
		fmt.Printf("%-28s WARNING ingest rejected %d events\n", name+":", r.RejectedEvents)
	}
	return nil
}

func (b *bench) benchmark(ctx context.Context) error {
	c := b.o.concurrency
	var maxes, ceilings []*phase
	for i := 1; i <= b.o.runs; i++ {
		m, err := b.httpRun(ctx, fmt.Sprintf("run %d ingest max", i), c, 0, b.o.duration)
		if err != nil {
			return err
		}
		maxes = append(maxes, m)
		cl, err := b.ceilingRun(ctx, fmt.Sprintf("run %d ceiling", i), c)
		if err != nil {
			return err
		}
		ceilings = append(ceilings, cl)
	}
	maxRate := loadgen.Median(collect(maxes, func(p *phase) float64 { return p.report.EventsPerSec }))
	reqRate := maxRate / 2 / loadgen.DefaultBatch
	half, err := b.httpRun(ctx, "ingest at half load", b.outstanding(), reqRate, b.o.duration)
	if err != nil {
		return err
	}
	ratios := make([]float64, len(maxes))
	for i := range maxes {
		ratios[i] = maxes[i].report.EventsPerSec / ceilings[i].report.EventsPerSec
	}
	printTable(os.Stdout, b.o, maxes, ceilings, half, ratios)
	return nil
}

func (b *bench) sweep(ctx context.Context, conc []int) error {
	type row struct {
		c            int
		ingest, ceil *phase
	}
	var rows []row
	for _, c := range conc {
		m, err := b.httpRun(ctx, fmt.Sprintf("c=%d ingest max", c), c, 0, b.o.duration)
		if err != nil {
			return err
		}
		cl, err := b.ceilingRun(ctx, fmt.Sprintf("c=%d ceiling", c), c)
		if err != nil {
			return err
		}
		rows = append(rows, row{c, m, cl})
	}
	fmt.Printf("\n| concurrency | ingest events/s | ingest p50 | ingest p99 | ingest CPU s/100k | ceiling events/s | ceiling p99 | ingest/ceiling |\n")
	fmt.Printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %s | %.2f | %s | %s | %.0f%% |\n", r.c,
			thousands(r.ingest.report.EventsPerSec), msec(r.ingest.report.Latency.P50), msec(r.ingest.report.Latency.P99),
			r.ingest.proc.CPUPer100k, thousands(r.ceil.report.EventsPerSec), msec(r.ceil.report.Latency.P99),
			100*r.ingest.report.EventsPerSec/r.ceil.report.EventsPerSec)
	}
	return nil
}

func printTable(w io.Writer, o options, maxes, ceilings []*phase, half *phase, ratios []float64) {
	med := func(ps []*phase, f func(*phase) float64) float64 { return loadgen.Median(collect(ps, f)) }
	eps := func(p *phase) float64 { return p.report.EventsPerSec }
	p50 := func(p *phase) float64 { return float64(p.report.Latency.P50) }
	p99 := func(p *phase) float64 { return float64(p.report.Latency.P99) }
	cpu := func(p *phase) float64 { return p.proc.CPUPer100k }
	rss := func(p *phase) float64 { return float64(p.proc.PeakRSS) }
	brk := func(p *phase) float64 { return p.broker.CPUPer100k }
	peak := func(ps []*phase) float64 { return slices.Max(collect(ps, rss)) }

	ingestMax, ceiling, ratio := med(maxes, eps), med(ceilings, eps), loadgen.Median(ratios)
	ingestCPU := med(maxes, cpu)
	halfP99 := half.report.Latency.P99

	fmt.Fprintf(w, "\n%d runs of %s each, %d workers, batches of %d REQUEST_RESPONSE events (~1 KB), acks=all; medians of the runs, peak RSS is the largest.\n\n",
		o.runs, o.duration, o.concurrency, loadgen.DefaultBatch)
	fmt.Fprintln(w, "| | events/s | p50 | p99 | CPU s / 100k events | peak RSS | broker CPU s / 100k events | ingest / ceiling |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| ingest max (closed loop, %d workers) | %s | %s | %s | %.2f (ingest) | %s (ingest) | %.2f | %.0f%% |\n",
		o.concurrency, thousands(ingestMax), msec(time.Duration(med(maxes, p50))), msec(time.Duration(med(maxes, p99))),
		ingestCPU, mib(peak(maxes)), med(maxes, brk), 100*ratio)
	fmt.Fprintf(w, "| ceiling: kafka-go straight to the broker (%d goroutines) | %s | %s | %s | %.2f (producer) | %s (producer) | %.2f | 100%% |\n",
		o.concurrency, thousands(ceiling), msec(time.Duration(med(ceilings, p50))), msec(time.Duration(med(ceilings, p99))),
		med(ceilings, cpu), mib(peak(ceilings)), med(ceilings, brk))
	fmt.Fprintf(w, "| ingest at half load (open loop, %.0f req/s) | %s | %s | %s | %.2f (ingest) | %s (ingest) | %.2f | |\n",
		half.report.TargetRate, thousands(eps(half)), msec(half.report.Latency.P50), msec(halfP99),
		cpu(half), mib(rss(half)), brk(half))

	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- throughput >= %s events/s: %s (%s events/s)\n", thousands(goalEventsPerSec), met(ingestMax >= goalEventsPerSec), thousands(ingestMax))
	fmt.Fprintf(w, "- CPU <= %.1f s per 100k events: %s (%.2f s)\n", goalCPUPer100k, met(ingestCPU <= goalCPUPer100k), ingestCPU)
	fmt.Fprintf(w, "- >= %.0f%% of the ceiling at equal batching: %s (%.0f%%)\n", 100*goalCeilingRatio, met(ratio >= goalCeilingRatio), 100*ratio)
	fmt.Fprintf(w, "- p99 < %s at half of the maximum load: %s (%s at %s events/s", msec(goalHalfLoadP99), met(halfP99 < goalHalfLoadP99), msec(halfP99), thousands(eps(half)))
	if half.report.Missed > 0 || half.report.Failed > 0 {
		fmt.Fprintf(w, "; %d requests missed their slot, %d failed", half.report.Missed, half.report.Failed)
	}
	fmt.Fprintln(w, ")")
}

// meters samples several processes over one phase.
type meters []*loadgen.Meter

func startMeters(pids ...int) (meters, error) {
	var ms meters
	for _, pid := range pids {
		m, err := loadgen.StartMeter(pid)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (ms meters) stop(events int64) ([]*loadgen.Usage, error) {
	out := make([]*loadgen.Usage, len(ms))
	for i, m := range ms {
		u, err := m.Stop(events)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

func collect(ps []*phase, f func(*phase) float64) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = f(p)
	}
	return out
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root with go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find the module root: run the benchmark inside the repository")
	}
	return filepath.Dir(gomod), nil
}

func parseInts(list string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sweep %q: %q is not a positive integer", list, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func lastLine(b []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return "\n" + string(exit.Stderr)
	}
	return ""
}

func msec(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func mib(b float64) string { return strconv.FormatFloat(b/(1<<20), 'f', 0, 64) + " MiB" }

// thousands formats n rounded to an integer with comma grouping.
func thousands(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
