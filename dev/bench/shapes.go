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
	// With -floors: the net/http server that only answers (its use is the
	// phase's proc), and the stock proxy in front of ingest with its own
	// use in each run.
	floor, proxied []*phase
	proxyUse       []*loadgen.Usage
}

// shaped measures each shape: ingest called directly, through the
// gateway, with -floors net/http's floors, and (unless -shape-rate) the
// ceiling producing the same records with the same batching, -runs times
// each, alternating.
func (b *bench) shaped(ctx context.Context) error {
	if err := b.s.startGateway(ctx); err != nil {
		return err
	}
	var floor, proxy *child
	if b.o.floors {
		var err error
		if floor, err = b.s.startFloor(ctx, "net/http server"); err != nil {
			return err
		}
		if proxy, err = b.s.startFloor(ctx, "stock proxy", "-proxy", b.s.ingest.url); err != nil {
			return err
		}
	}
	ingestPID := b.s.ingest.pid()
	var all []shapeRuns
	for _, sh := range b.shapes {
		bodies := loadgen.Bodies(loadgen.BodyOptions{Count: b.o.bodies, Events: sh.events, AppID: demoApp, Seed: b.o.seed, EventBytes: sh.eventBytes})
		r := shapeRuns{shape: sh}
		for i := 1; i <= b.o.runs; i++ {
			name := fmt.Sprintf("%s run %d", sh, i)
			d, _, err := b.shapeHTTP(ctx, name+" direct", b.s.ingest.url, sh, bodies, ingestPID, 0)
			if err != nil {
				return err
			}
			g, gu, err := b.shapeHTTP(ctx, name+" gateway", b.s.gateway.url, sh, bodies, ingestPID, b.s.gateway.pid())
			if err != nil {
				return err
			}
			if floor != nil {
				f, _, err := b.shapeHTTP(ctx, name+" net/http server", floor.url, sh, bodies, floor.pid(), 0)
				if err != nil {
					return err
				}
				p, pu, err := b.shapeHTTP(ctx, name+" stock proxy", proxy.url, sh, bodies, ingestPID, proxy.pid())
				if err != nil {
					return err
				}
				r.floor, r.proxied, r.proxyUse = append(r.floor, f), append(r.proxied, p), append(r.proxyUse, pu)
			}
			r.direct, r.gateway = append(r.direct, d), append(r.gateway, g)
			if b.o.shapeRate == 0 {
				c, err := b.ceilingRun(ctx, name+" ceiling", b.o.concurrency,
					"-batch", strconv.Itoa(sh.events), "-event-bytes", strconv.Itoa(sh.eventBytes))
				if err != nil {
					return err
				}
				r.ceiling = append(r.ceiling, c)
			}
			r.gatewayUse = append(r.gatewayUse, gu)
		}
		all = append(all, r)
	}
	printShapes(os.Stdout, b.o, b.outstanding(), all)
	return nil
}

// shapeHTTP is a closed loop of -concurrency workers (with -shape-rate, an
// open loop) sending bodies to url, metering the server (ingest, or a
// floor), the broker, this process and, when frontPID is set, the proxy in
// front of the server.
func (b *bench) shapeHTTP(ctx context.Context, name, url string, sh shape, bodies [][]byte, serverPID, frontPID int) (*phase, *loadgen.Usage, error) {
	pids := []int{serverPID, b.s.broker.PID(), os.Getpid()}
	if frontPID != 0 {
		pids = append(pids, frontPID)
	}
	meters, err := startMeters(pids...)
	if err != nil {
		return nil, nil, err
	}
	cfg := loadgen.HTTPConfig{
		URL: url + "/cms/app/events", Token: b.s.token, Bodies: bodies,
		EventsPerBody: sh.events, Concurrency: b.o.concurrency, Duration: b.o.duration,
		Client: b.client,
	}
	if b.o.shapeRate > 0 {
		cfg.Rate, cfg.Concurrency = b.o.shapeRate/float64(sh.events), b.outstanding()
	}
	r, err := loadgen.RunHTTP(ctx, cfg)
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
	what := "ingest"
	if serverPID != b.s.ingest.pid() {
		what = "server"
	}
	p := &phase{what: what, report: r, proc: u[0], broker: u[1], gen: u[2]}
	var gw *loadgen.Usage
	if frontPID != 0 {
		gw = u[3]
		fmt.Printf("%-32s %s; front %.2f CPU s/100k\n", name+":", p, gw.CPUPer100k)
	} else {
		fmt.Printf("%-32s %s\n", name+":", p)
	}
	return p, gw, nil
}

func printShapes(w io.Writer, o options, outstanding int, all []shapeRuns) {
	med := func(ps []*phase, f func(*phase) float64) float64 { return loadgen.Median(collect(ps, f)) }
	eps := func(p *phase) float64 { return p.report.EventsPerSec }
	cpu := func(p *phase) float64 { return p.proc.CPUPer100k }
	brk := func(p *phase) float64 { return p.broker.CPUPer100k }
	usage := func(us []*loadgen.Usage) float64 {
		v := make([]float64, len(us))
		for i, u := range us {
			v[i] = u.CPUPer100k
		}
		return loadgen.Median(v)
	}
	load := fmt.Sprintf("%d workers (the ceiling: %d goroutines, a WriteMessages call per request's records)", o.concurrency, o.concurrency)
	if o.shapeRate > 0 {
		load = fmt.Sprintf("an open loop at %s events/s with at most %d requests outstanding (no ceiling: it is a closed loop)", thousands(o.shapeRate), outstanding)
	}
	fmt.Fprintf(w, "\n%d runs of %s each per shape and path, %s, acks=all; medians of the runs. CPU is seconds per 100k events.\n\n", o.runs, o.duration, load)
	fmt.Fprintln(w, "| events × size | direct events/s | ingest CPU | broker CPU | via gateway events/s | ingest CPU | gateway CPU | gateway / ingest CPU | ceiling events/s | producer CPU | direct / ceiling |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range all {
		gateway := usage(r.gatewayUse)
		ceiling := "– | – | –"
		if len(r.ceiling) > 0 {
			ratios := make([]float64, len(r.ceiling))
			for i, c := range r.ceiling {
				ratios[i] = eps(r.direct[i]) / eps(c)
			}
			ceiling = fmt.Sprintf("%s | %.2f | %.0f%%", thousands(med(r.ceiling, eps)), med(r.ceiling, cpu), 100*loadgen.Median(ratios))
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %.0f%% | %s |\n", r.shape,
			thousands(med(r.direct, eps)), med(r.direct, cpu), med(r.direct, brk),
			thousands(med(r.gateway, eps)), med(r.gateway, cpu), gateway, 100*gateway/med(r.gateway, cpu), ceiling)
	}
	if len(all) == 0 || len(all[0].floor) == 0 {
		return
	}
	fmt.Fprintln(w, "\nThe least net/http costs for the same requests (dev/httpfloor): a server that reads each body and answers, and a stock httputil.ReverseProxy in front of ingest; ratios are to ingest's CPU in the same path.")
	fmt.Fprintln(w, "\n| events × size | ingest CPU | net/http server CPU | server / ingest | gateway / ingest | stock proxy CPU | stock proxy / ingest |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range all {
		direct, server := med(r.direct, cpu), med(r.floor, cpu)
		gateway, proxy := usage(r.gatewayUse), usage(r.proxyUse)
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.0f%% | %.0f%% | %.2f | %.0f%% |\n", r.shape,
			direct, server, 100*server/direct, 100*gateway/med(r.gateway, cpu), proxy, 100*proxy/med(r.proxied, cpu))
	}
}

// startFloor starts dev/httpfloor with args on a free loopback port.
func (s *stack) startFloor(ctx context.Context, what string, args ...string) (*child, error) {
	port, err := devbroker.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(s.bins["httpfloor"], append([]string{"-addr", addr}, args...)...)
	cmd.Stderr = os.Stderr
	return s.launch(ctx, what, cmd, "http://"+addr)
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
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+addr, "OPERATOR_ADDR="+operator, "INGEST_URL="+s.ingest.url, "API_URL="+s.api.url, "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	s.gateway, err = s.launch(ctx, "api gateway", cmd, "http://"+addr, "operator", operator)
	return err
}
