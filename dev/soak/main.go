// Command soak runs the local stack under a steady event load for a long
// time and then checks that nothing was lost: every event answered 200 must
// be in ClickHouse exactly once after deduplication. It reports the counts,
// the consumer's lag and the end-to-end freshness, and the memory of every
// process over time, and fails if a service's memory grew beyond the bound.
//
//	go run ./dev/soak                         # 5,000 events/s for 10 minutes
//	go run ./dev/soak -rate 8000 -duration 30m
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/assistantcms/cms/internal/delivery"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/operator/statuspage"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	dto "github.com/prometheus/client_model/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	rate        float64
	duration    time.Duration
	batch       int
	concurrency int
	sample      time.Duration
	warmup      time.Duration
	growth      float64
	slack       int64
	dir         string
	series      string
	drain       time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&o.rate, "rate", 5000, "events per second sent through the gateway")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the load runs")
	fs.IntVar(&o.batch, "batch", 50, "events per request")
	fs.IntVar(&o.concurrency, "concurrency", 16, "requests in flight at most")
	fs.DurationVar(&o.sample, "sample", 10*time.Second, "how often memory, lag and freshness are sampled")
	fs.DurationVar(&o.warmup, "warmup", time.Minute, "time before memory counts as settled: growth is measured from the end of it")
	fs.Float64Var(&o.growth, "memory-growth", 0.25, "largest growth of a service's resident memory after warm-up, as a fraction")
	fs.Int64Var(&o.slack, "memory-slack-mib", 32, "growth in MiB allowed besides -memory-growth, for small processes")
	fs.StringVar(&o.dir, "dir", "", "directory for the stack's binaries and data (default: a new temporary directory, removed after)")
	fs.StringVar(&o.series, "series", "", "file to write the samples to as tab-separated values (optional)")
	fs.DurationVar(&o.drain, "drain-timeout", 5*time.Minute, "longest wait for ClickHouse to hold every acknowledged event")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.rate <= 0, o.duration <= 0, o.batch <= 0, o.concurrency <= 0, o.sample <= 0:
		return o, errors.New("-rate, -duration, -batch, -concurrency and -sample must be positive")
	case o.warmup >= o.duration:
		return o, fmt.Errorf("-warmup %s must be shorter than -duration %s", o.warmup, o.duration)
	}
	return o, nil
}

// sample is one look at the stack.
type sample struct {
	at       time.Duration
	acked    int64
	lag      float64
	rss      map[string]int64 // bytes, by component
	fresh    *dto.Histogram
	failures int64
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "soak-"); err != nil {
			return fmt.Errorf("create a directory for the stack: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", logs, err)
	}
	logFile := func(name string) io.Writer {
		f, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return io.Discard
		}
		return f // closed when the process ends
	}
	log.Info("building and starting the local stack", "dir", dir)
	st, err := localstack.Start(ctx, localstack.Options{Dir: dir, Log: logFile})
	if err != nil {
		return fmt.Errorf("start the local stack: %w", err)
	}
	defer st.Stop()

	ch, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		return err
	}
	defer ch.Close()
	consumerMetrics := statuspage.Remote("consumer", "http://"+st.ConsumerOperator+"/metrics", &http.Client{Timeout: 5 * time.Second})

	runID := "soak-" + strconv.FormatInt(time.Now().Unix(), 10)
	log.Info("load starts", "rate", o.rate, "duration", o.duration, "run", runID)
	load, err := delivery.Start(ctx, delivery.Config{
		URL: "http://" + st.Gateway + "/cms/app/events", Token: st.Token, EventsPerSecond: o.rate,
		BatchSize: o.batch, Concurrency: o.concurrency, RunID: runID,
	})
	if err != nil {
		return err
	}
	start := time.Now()
	var samples []sample
	look := func() {
		s := sample{at: time.Since(start), rss: map[string]int64{}}
		ls := load.Stats()
		s.acked, s.failures = ls.AcknowledgedEvents, ls.Failures()
		for name, pid := range st.PIDs() {
			if rss, err := residentBytes(pid); err == nil {
				s.rss[name] = rss
			}
		}
		if fams, err := consumerMetrics.Gather(ctx); err == nil {
			s.lag = sum(fams["cms_consumer_lag_messages"])
			if f := fams["cms_consumer_freshness_seconds"]; f != nil && len(f.GetMetric()) == 1 {
				s.fresh = f.GetMetric()[0].GetHistogram()
			}
		}
		samples = append(samples, s)
		log.Info("sample", "at", s.at.Round(time.Second), "acknowledged_events", s.acked, "failed_requests", s.failures,
			"lag", s.lag, "rss_mib", mibs(s.rss))
	}
	look()
	tick := time.NewTicker(o.sample)
	end := time.NewTimer(o.duration)
	for running := true; running; {
		select {
		case <-tick.C:
			look()
		case <-end.C:
			running = false
		case <-ctx.Done():
			running = false
		case name := <-st.Exited():
			tick.Stop()
			return fmt.Errorf("%s exited during the soak; its log is in %s", name, logs)
		}
	}
	tick.Stop()
	look()
	loadTime := time.Since(start)
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted after %s", loadTime.Round(time.Second))
	}

	log.Info("load stopped; waiting for every acknowledged batch and for ClickHouse")
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	stats, err := load.Stop(sctx)
	cancel()
	if err != nil {
		return err
	}
	drainStart := time.Now()
	wctx, cancel := context.WithTimeout(ctx, o.drain)
	err = load.WaitStored(wctx, ch.Conn(), "default")
	cancel()
	drained := time.Since(drainStart)
	look()
	check, verr := load.Verify(ctx, ch.Conn(), "default")
	if verr != nil {
		return verr
	}
	growth := report(stdout, o, loadTime, drained, stats, check, samples)
	if o.series != "" {
		if err := writeSeries(o.series, samples); err != nil {
			return err
		}
	}
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	if !check.OK() {
		problems = append(problems, "ClickHouse does not hold every acknowledged event exactly once: "+check.String())
	}
	problems = append(problems, growth...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// residentBytes is the process's resident set size, from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read the memory of process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read the memory of process %d: %q: %w", pid, line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read the memory of process %d: no VmRSS", pid)
}

func sum(f *dto.MetricFamily) float64 {
	var s float64
	for _, m := range f.GetMetric() {
		s += m.GetGauge().GetValue()
	}
	return s
}

func mibs(rss map[string]int64) string {
	names := make([]string, 0, len(rss))
	for n := range rss {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d ", n, rss[n]>>20)
	}
	return strings.TrimSpace(b.String())
}

// report prints the results and returns the memory bounds broken.
func report(w io.Writer, o options, loadTime, drained time.Duration, st delivery.Stats, c delivery.Check, samples []sample) []string {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nSoak: %.0f events/s asked for %s, batches of %d, %d in flight at most\n\n", o.rate, o.duration, o.batch, o.concurrency)
	fmt.Fprintf(tw, "events acknowledged (200)\t%d\t(%.0f/s over %s)\n", st.AcknowledgedEvents, float64(st.AcknowledgedEvents)/loadTime.Seconds(), loadTime.Round(time.Second))
	fmt.Fprintf(tw, "requests\t%d\t%v, %d retried\n", st.Requests, st.Answers, st.Retries)
	fmt.Fprintf(tw, "request latency\tp50 %s\tp99 %s, max %s\n", st.Latency.P50, st.Latency.P99, st.Latency.Max)
	fmt.Fprintf(tw, "in ClickHouse after deduplication\t%d\tmissing %d, duplicates %d (rows before deduplication %d)\n", c.Stored, c.Missing, c.Duplicates, c.RowsBeforeDedup)
	fmt.Fprintf(tw, "drain after the load\t%s\tuntil every acknowledged event was in ClickHouse\n", drained.Round(100*time.Millisecond))
	var lags []float64
	for _, s := range samples {
		lags = append(lags, s.lag)
	}
	slices.Sort(lags)
	if len(lags) > 0 {
		fmt.Fprintf(tw, "consumer lag (messages)\tmedian %.0f\tmax %.0f over %d samples\n", lags[len(lags)/2], lags[len(lags)-1], len(lags))
	}
	if first, last := samples[0].fresh, samples[len(samples)-1].fresh; last != nil {
		fmt.Fprintf(tw, "freshness (ingest to row)\tp50 ≤ %s\tp99 ≤ %s, p99.9 ≤ %s (histogram bucket bounds, %d rows)\n",
			quantile(first, last, 0.5), quantile(first, last, 0.99), quantile(first, last, 0.999), last.GetSampleCount()-first.GetSampleCount())
	}
	tw.Flush()

	// The product's own processes must settle. The development broker keeps
	// every topic in memory and ClickHouse caches what it reads, so both
	// grow with the data by design; they are reported only.
	bounded := []string{localstack.IngestName, localstack.ConsumerName, localstack.APIName, localstack.GatewayName}
	fmt.Fprintf(w, "\nResident memory (MiB): after warm-up (%s), highest after it, at the end\n", o.warmup)
	var broken []string
	names := map[string]bool{}
	for _, s := range samples {
		for n := range s.rss {
			names[n] = true
		}
	}
	for _, n := range []string{localstack.BrokerName, localstack.ClickHouseName, localstack.IngestName, localstack.ConsumerName, localstack.APIName, localstack.GatewayName} {
		if !names[n] {
			continue
		}
		var settled, peak, last int64
		for _, s := range samples {
			v, ok := s.rss[n]
			if !ok {
				continue
			}
			if s.at <= o.warmup || settled == 0 {
				settled = v
			}
			if s.at > o.warmup {
				peak = max(peak, v)
			}
			last = v
		}
		limit := int64(float64(settled)*(1+o.growth)) + o.slack<<20
		verdict := "reported only: holds data in memory by design"
		if slices.Contains(bounded, n) {
			verdict = fmt.Sprintf("bound %d: ok", limit>>20)
			if peak > limit {
				verdict = fmt.Sprintf("bound %d: EXCEEDED", limit>>20)
				broken = append(broken, fmt.Sprintf("%s's memory grew from %d MiB to %d MiB, beyond %d MiB", n, settled>>20, peak>>20, limit>>20))
			}
		}
		fmt.Fprintf(w, "  %-10s %6d %6d %6d   %s\n", n, settled>>20, peak>>20, last>>20, verdict)
	}
	return broken
}

// quantile reads the q-quantile of the observations between two snapshots
// of a histogram as the upper bound of the bucket that holds it.
func quantile(first, last *dto.Histogram, q float64) string {
	before := map[float64]uint64{}
	for _, b := range first.GetBucket() {
		before[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	total := last.GetSampleCount() - first.GetSampleCount()
	if total == 0 {
		return "n/a"
	}
	for _, b := range last.GetBucket() {
		if float64(b.GetCumulativeCount()-before[b.GetUpperBound()]) >= q*float64(total) {
			return (time.Duration(b.GetUpperBound() * float64(time.Second))).String()
		}
	}
	return "beyond the largest bucket"
}

func writeSeries(path string, samples []sample) error {
	var b strings.Builder
	names := []string{localstack.BrokerName, localstack.ClickHouseName, localstack.IngestName, localstack.ConsumerName, localstack.APIName, localstack.GatewayName}
	b.WriteString("seconds\tacknowledged_events\tfailed_requests\tconsumer_lag")
	for _, n := range names {
		b.WriteString("\t" + n + "_rss_mib")
	}
	b.WriteByte('\n')
	for _, s := range samples {
		fmt.Fprintf(&b, "%.0f\t%d\t%d\t%.0f", s.at.Seconds(), s.acked, s.failures, s.lag)
		for _, n := range names {
			fmt.Fprintf(&b, "\t%d", s.rss[n]>>20)
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write the samples: %w", err)
	}
	return nil
}
