package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/loadgen"
)

// shape is a kind of request: how many events of about what size.
type shape struct {
	events, eventBytes int
}

func (s shape) String() string {
	return fmt.Sprintf("%d × %s", s.events, sizeName(s.eventBytes))
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KB"
	}
	return strconv.Itoa(n) + " B"
}

// parseShapes reads EVENTSxSIZE[,...], the size in bytes or with a k
// suffix (1k: 1,024 bytes; 1k is also the events' own size).
func parseShapes(list string) ([]shape, error) {
	var out []shape
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		n, size, ok := strings.Cut(f, "x")
		events, err := strconv.Atoi(n)
		if !ok || err != nil || events <= 0 {
			return nil, fmt.Errorf("-shapes %q: %q is not EVENTSxSIZE, as 5x1k", list, f)
		}
		mult := 1
		if s, found := strings.CutSuffix(strings.ToLower(size), "k"); found {
			size, mult = s, 1024
		}
		b, err := strconv.Atoi(size)
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("-shapes %q: %q has no size in bytes", list, f)
		}
		out = append(out, shape{events: events, eventBytes: b * mult})
	}
	return out, nil
}

// shapeRuns are the measured runs of one shape.
type shapeRuns struct {
	shape                    shape
	direct, gateway, ceiling []*phase
	// gatewayUse is the gateway's own use in each gateway run.
	gatewayUse []*loadgen.Usage
}

// shaped measures each shape: ingest called directly, through the
// gateway, and the ceiling producing the same records with the same
// batching, -runs times each, alternating.
func (b *bench) shaped(ctx context.Context) error {
	if err := b.s.startGateway(ctx); err != nil {
		return err
	}
	var all []shapeRuns
	for _, sh := range b.shapes {
		bodies := loadgen.Bodies(loadgen.BodyOptions{Count: b.o.bodies, Events: sh.events, AppID: demoApp, Seed: b.o.seed, EventBytes: sh.eventBytes})
		r := shapeRuns{shape: sh}
		for i := 1; i <= b.o.runs; i++ {
			name := fmt.Sprintf("%s run %d", sh, i)
			d, _, err := b.shapeHTTP(ctx, name+" direct", b.s.url, sh, bodies, 0)
			if err != nil {
				return err
			}
			g, gu, err := b.shapeHTTP(ctx, name+" gateway", b.s.gatewayURL, sh, bodies, b.s.gateway.Process.Pid)
			if err != nil {
				return err
			}
			c, err := b.ceilingRun(ctx, name+" ceiling", b.o.concurrency,
				"-batch", strconv.Itoa(sh.events), "-event-bytes", strconv.Itoa(sh.eventBytes))
			if err != nil {
				return err
			}
			r.direct, r.gateway, r.ceiling = append(r.direct, d), append(r.gateway, g), append(r.ceiling, c)
			r.gatewayUse = append(r.gatewayUse, gu)
		}
		all = append(all, r)
	}
	printShapes(os.Stdout, b.o, all)
	return nil
}

// shapeHTTP is a closed loop of -concurrency workers sending bodies to
// url, metering ingest, the broker, this process and, when gatewayPID is
// set, the gateway.
func (b *bench) shapeHTTP(ctx context.Context, name, url string, sh shape, bodies [][]byte, gatewayPID int) (*phase, *loadgen.Usage, error) {
	pids := []int{b.s.ingest.Process.Pid, b.s.broker.PID(), os.Getpid()}
	if gatewayPID != 0 {
		pids = append(pids, gatewayPID)
	}
	meters, err := startMeters(pids...)
	if err != nil {
		return nil, nil, err
	}
	r, err := loadgen.RunHTTP(ctx, loadgen.HTTPConfig{
		URL: url + "/cms/app/events", Token: b.s.token, Bodies: bodies,
		EventsPerBody: sh.events, Concurrency: b.o.concurrency, Duration: b.o.duration,
		Client: b.client,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	u, err := meters.stop(r.Events)
	if err != nil {
		return nil, nil, err
	}
	if err := checkReport(name, r); err != nil {
		return nil, nil, err
	}
	p := &phase{what: "ingest", report: r, proc: u[0], broker: u[1], gen: u[2]}
	var gw *loadgen.Usage
	if gatewayPID != 0 {
		gw = u[3]
		fmt.Printf("%-32s %s; gateway %.2f CPU s/100k\n", name+":", p, gw.CPUPer100k)
	} else {
		fmt.Printf("%-32s %s\n", name+":", p)
	}
	return p, gw, nil
}

func printShapes(w io.Writer, o options, all []shapeRuns) {
	med := func(ps []*phase, f func(*phase) float64) float64 { return loadgen.Median(collect(ps, f)) }
	eps := func(p *phase) float64 { return p.report.EventsPerSec }
	cpu := func(p *phase) float64 { return p.proc.CPUPer100k }
	brk := func(p *phase) float64 { return p.broker.CPUPer100k }
	fmt.Fprintf(w, "\n%d runs of %s each per shape and path, %d workers (the ceiling: %d goroutines, a WriteMessages call per request's records), acks=all; medians of the runs. CPU is seconds per 100k events.\n\n",
		o.runs, o.duration, o.concurrency, o.concurrency)
	fmt.Fprintln(w, "| events × size | direct events/s | ingest CPU | broker CPU | via gateway events/s | ingest CPU | gateway CPU | gateway / ingest CPU | ceiling events/s | producer CPU | direct / ceiling |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range all {
		gwCPU := make([]float64, len(r.gatewayUse))
		ratios := make([]float64, len(r.direct))
		for i, u := range r.gatewayUse {
			gwCPU[i] = u.CPUPer100k
			ratios[i] = eps(r.direct[i]) / eps(r.ceiling[i])
		}
		gateway := loadgen.Median(gwCPU)
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %.0f%% | %s | %.2f | %.0f%% |\n", r.shape,
			thousands(med(r.direct, eps)), med(r.direct, cpu), med(r.direct, brk),
			thousands(med(r.gateway, eps)), med(r.gateway, cpu), gateway, 100*gateway/med(r.gateway, cpu),
			thousands(med(r.ceiling, eps)), med(r.ceiling, cpu), 100*loadgen.Median(ratios))
	}
}

// startGateway starts api serve (the gateway's other upstream) and api
// gateway in front of ingest.
func (s *stack) startGateway(ctx context.Context) error {
	if s.api == nil {
		if err := s.startAPI(ctx, filepath.Join(s.dir, "content.db"), 0); err != nil {
			return err
		}
	}
	port, err := devbroker.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.gatewayURL = "http://" + addr
	// Its metrics and profiles, for a look during a run.
	opPort, err := devbroker.FreePort()
	if err != nil {
		return err
	}
	operator := "127.0.0.1:" + strconv.Itoa(opPort)
	logf, err := os.Create(filepath.Join(s.dir, "gateway.log"))
	if err != nil {
		return fmt.Errorf("create gateway log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bins["api"], "gateway")
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+addr, "OPERATOR_ADDR="+operator, "INGEST_URL="+s.url, "API_URL="+s.apiURL, "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start api gateway: %w", err)
	}
	s.gateway = cmd
	s.gatewayDone = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.gatewayDone) }()
	if err := waitHTTPReady(ctx, "api gateway", s.gatewayURL+"/readyz", s.gatewayDone, 60*time.Second); err != nil {
		return err
	}
	s.log.Info("gateway ready", "url", s.gatewayURL, "pid", cmd.Process.Pid, "operator", operator)
	return nil
}
