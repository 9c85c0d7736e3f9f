package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/livewatch"
	"github.com/assistantcms/cms/internal/loadgen"
)

// startAPI runs api serve on the benchmark's broker and content database,
// for -watchers runs, with a management token of the demo app (runtime
// tokens may not watch events).
func (s *stack) startAPI(ctx context.Context, db string, watchers int) error {
	out, err := exec.CommandContext(ctx, s.bins["api"], "-content-db", db, "demo", "--quiet", "--management").Output()
	if err != nil {
		return fmt.Errorf("create a management token with api demo: %w%s", err, stderrOf(err))
	}
	if s.managementToken = lastLine(out); s.managementToken == "" {
		return errors.New("create a management token: api demo printed nothing")
	}
	port, err := devbroker.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logf, err := os.Create(filepath.Join(s.dir, "api.log"))
	if err != nil {
		return fmt.Errorf("create api log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bins["api"], "serve")
	cmd.Env = append(os.Environ(), "API_ADDR="+addr, "CONTENT_DB="+db, "KAFKA_BROKERS="+s.broker.Addr(),
		"RATE_LIMIT_RPS=0", "ENCODER_DIR=off", "WORDNET_DIR=off", "LOG_LEVEL=warn",
		"LIVE_MAX_WATCHERS_PER_APP="+strconv.Itoa(max(watchers, 10)), "LIVE_MAX_WATCHERS="+strconv.Itoa(max(2*watchers, 100)))
	cmd.Stdout, cmd.Stderr = logf, logf
	s.api, err = s.launch(ctx, "api serve", cmd, "http://"+addr)
	return err
}

// watchedPhase is an ingest max run with watchers open: the run, the
// api's use, and what the watchers were sent.
type watchedPhase struct {
	*phase
	api      *loadgen.Usage
	streamed int64
	ended    int
}

// watch opens n streams of the app's events on the api and reads them
// until stop is called, which returns the events they were sent.
func (b *bench) watch(ctx context.Context, n int) (stop func() (streamed int64, ended int), err error) {
	var streams []*livewatch.Stream
	closeAll := func() {
		for _, st := range streams {
			st.Close()
		}
	}
	for range n {
		st, err := livewatch.Open(ctx, b.s.api.url+"/cms/app/events/live", b.s.managementToken, 1024)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open a live stream: %w", err)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		if err := st.WaitReading(30 * time.Second); err != nil {
			closeAll()
			return nil, fmt.Errorf("live stream: %w", err)
		}
	}
	// Read as a person's browser does: everything, at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := 0
	for _, st := range streams {
		wg.Go(func() {
			for m := range st.C() {
				if m.Kind == "end" {
					mu.Lock()
					ended++
					mu.Unlock()
				}
			}
		})
	}
	before := int64(0)
	for _, st := range streams {
		before += st.Events.Load()
	}
	return func() (int64, int) {
		total := int64(0)
		for _, st := range streams {
			total += st.Events.Load()
		}
		closeAll()
		wg.Wait()
		return total - before, ended
	}, nil
}

// watchedRun is ingest max with n watchers open on the app.
func (b *bench) watchedRun(ctx context.Context, name string, n int) (*watchedPhase, error) {
	stop, err := b.watch(ctx, n)
	if err != nil {
		return nil, err
	}
	m, err := loadgen.StartMeter(b.s.api.pid())
	if err != nil {
		stop()
		return nil, err
	}
	p, err := b.httpRun(ctx, name, b.o.concurrency, 0, b.o.duration)
	if err != nil {
		stop()
		return nil, err
	}
	u, err := m.Stop(p.report.Events)
	streamed, ended := stop()
	if err != nil {
		return nil, err
	}
	wp := &watchedPhase{phase: p, api: u, streamed: streamed, ended: ended}
	fmt.Printf("%-28s api %.2f CPU s/100k events read, %d events streamed to %d watchers (%d ended early)\n", name+":",
		u.CPUPer100k, streamed, n, ended)
	return wp, nil
}

// watched compares ingest max without and with watchers, alternating the
// order run by run so that a drift of the machine weighs on both alike.
func (b *bench) watched(ctx context.Context) error {
	n := b.o.watchers
	var bare []*phase
	var with []*watchedPhase
	for i := 1; i <= b.o.runs; i++ {
		runBare := func() error {
			// The api runs, idle: with no one watching it reads nothing.
			m, err := loadgen.StartMeter(b.s.api.pid())
			if err != nil {
				return err
			}
			p, err := b.httpRun(ctx, fmt.Sprintf("run %d ingest max", i), b.o.concurrency, 0, b.o.duration)
			if err != nil {
				return err
			}
			u, err := m.Stop(p.report.Events)
			if err != nil {
				return err
			}
			fmt.Printf("%-28s api %.2f CPU s/100k events (idle)\n", fmt.Sprintf("run %d ingest max", i)+":", u.CPUPer100k)
			bare = append(bare, p)
			return nil
		}
		runWith := func() error {
			p, err := b.watchedRun(ctx, fmt.Sprintf("run %d with %d watchers", i, n), n)
			if err != nil {
				return err
			}
			with = append(with, p)
			return nil
		}
		first, second := runBare, runWith
		if i%2 == 0 {
			first, second = runWith, runBare
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	eps := func(p *phase) float64 { return p.report.EventsPerSec }
	bareRate := loadgen.Median(collect(bare, eps))
	var withRates, apiPer100k, apiPerStreamed, streamedPerSec, ratios []float64
	for i, w := range with {
		withRates = append(withRates, w.report.EventsPerSec)
		apiPer100k = append(apiPer100k, w.api.CPUPer100k)
		if w.streamed > 0 {
			apiPerStreamed = append(apiPerStreamed, w.api.CPUSeconds/float64(w.streamed))
		}
		streamedPerSec = append(streamedPerSec, float64(w.streamed)/b.o.duration.Seconds())
		ratios = append(ratios, w.report.EventsPerSec/bare[i].report.EventsPerSec)
	}
	withRate := loadgen.Median(withRates)
	fmt.Printf("\n%d runs of %s each way, %d workers, batches of %d REQUEST_RESPONSE events (~1 KB), one app; %d streams of GET /cms/app/events/live on it, each sent at most LIVE_EVENTS_PER_SECOND (default %d); medians.\n\n",
		b.o.runs, b.o.duration, b.o.concurrency, loadgen.DefaultBatch, n, 50)
	fmt.Println("| | ingest events/s | ingest CPU s / 100k | api CPU s / 100k events read | events streamed / s | api CPU ms / event streamed |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	cpu := func(p *phase) float64 { return p.proc.CPUPer100k }
	withPhases := make([]*phase, len(with))
	for i, w := range with {
		withPhases[i] = w.phase
	}
	fmt.Printf("| no watchers | %s | %.2f | (idle) | | |\n", thousands(bareRate), loadgen.Median(collect(bare, cpu)))
	perStreamed := "n/a"
	if len(apiPerStreamed) > 0 {
		perStreamed = strconv.FormatFloat(1000*loadgen.Median(apiPerStreamed), 'f', 2, 64)
	}
	fmt.Printf("| %d watchers | %s | %.2f | %.2f | %s | %s |\n", n, thousands(withRate), loadgen.Median(collect(withPhases, cpu)),
		loadgen.Median(apiPer100k), thousands(loadgen.Median(streamedPerSec)), perStreamed)
	ratio := loadgen.Median(ratios)
	verdict := "met"
	if ratio < 0.95 {
		verdict = "NOT met"
	}
	fmt.Printf("\n- ingest with %d watchers within 5%% of without: %s (median of the runs' ratios %.1f%%; ratios %v)\n", n, verdict, 100*ratio, percents(ratios))
	return nil
}

func percents(rs []float64) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = strconv.FormatFloat(100*r, 'f', 1, 64) + "%"
	}
	return out
}
