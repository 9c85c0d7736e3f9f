// Command apibench measures the content API against a bare Gin ceiling on
// this machine:
//
//	go run ./dev/apibench [-duration 10s] [-runs 3] [-concurrency 64]
//	go run ./dev/apibench -suite knowledge [-concurrency 16]
//	go run ./dev/apibench -backend postgres   # either suite, on PostgreSQL
//	go run ./dev/apibench -suite knowledge -encoder off   # lexical only
//
// The content suite (the default) is described below. The knowledge suite
// imports 10,000 documents and 1,000 FAQs made from the evaluation corpus
// in pkg/content/knowledge/testdata/eval and measures GET /cms/search, GET
// /cms/faq/query and GET /cms/suggestions with the labelled questions
// (prefixes of them for suggestions), each against a bare Gin route
// answering a body of the same size, and reports p99 at that concurrency.
// With the sentence encoder (the api's default; -encoder sets ENCODER_DIR)
// it also reports how long after the start the api first answers by
// meaning (X-Retrieval: hybrid), the same after a restart on the same
// content database (whose stored vectors it reuses), and the api's peak
// resident memory (VmHWM).
//
// It builds cmd/api, imports an app with 100 handlers (about 1 KB each)
// into a new content database, starts "api serve" on a loopback port with
// rate limiting off, and, for each run and each endpoint:
//
//   - max: a closed loop of -concurrency workers requesting
//     GET /cms/handler/{id} (the 100 IDs in turn) or GET /cms/handler for
//     -duration;
//   - ceiling: the same loop against a bare Gin route, in a process of its
//     own, answering a static body of the same size.
//
// Then it runs an open loop at half the median maximum of each endpoint
// and reports p99 latency from each request's scheduled start, and prints
// a Markdown table of medians with the goals met or not.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/internal/loadgen"
)

// The goals the report is held against.
const (
	goalCeilingRatio = 0.5
	goalHalfLoadP99  = 10 * time.Millisecond
	handlers         = 100
)

func main() {
	static := flag.String("serve-static", "", "internal: serve FILE's bytes on GET /static at -addr (the ceiling)")
	addr := flag.String("addr", "", "internal: address for -serve-static")
	duration := flag.Duration("duration", 10*time.Second, "length of each measured loop")
	runs := flag.Int("runs", 3, "runs of each loop; the report gives medians")
	conc := flag.Int("concurrency", 0, "concurrent requests in the closed loops (default 64 for content, 16 for knowledge)")
	suiteName := flag.String("suite", "content", "content (handlers) or knowledge (search, FAQ, suggestions)")
	backend := flag.String("backend", "sqlite", "content database: sqlite (a file) or postgres (a private PostgreSQL server, installed with apt when missing)")
	encoderDir := flag.String("encoder", "", "ENCODER_DIR of the api: empty for its default, \"off\" for lexical ranking only")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *static != "" {
		err = serveStatic(ctx, *static, *addr)
	} else {
		var s suite
		switch *suiteName {
		case "content":
			s = contentSuite()
		case "knowledge":
			s = knowledgeSuite()
		default:
			err = fmt.Errorf("unknown suite %q", *suiteName)
		}
		if err == nil && *backend != "sqlite" && *backend != "postgres" {
			err = fmt.Errorf("unknown backend %q (sqlite or postgres)", *backend)
		}
		if err == nil {
			if *conc <= 0 {
				*conc = s.concurrency
			}
			s.backend = *backend
			s.encoder = *encoderDir
			err = run(ctx, log, s, *duration, *runs, *conc)
		}
	}
	if err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

// serveStatic is the ceiling: Gin with nothing but one route.
func serveStatic(ctx context.Context, file, addr string) error {
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/static", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", body) })
	srv := &http.Server{Addr: addr, Handler: r}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handlerBundle is one app with n handlers of about 1 KB each.
func handlerBundle(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"organizations":[{"id":"bench-org","name":"Bench"}],"apps":[{"appId":"bench-app","organizationId":"bench-org","name":"Bench"}],"handlers":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"appId":"bench-app","intentId":"Intent%03d","name":"Intent %d","type":"InSessionIntent",`+
			`"content":{"Intent%03d":[{"outputSpeech":{"displayText":"Our downtown store opens at nine and closes at six on weekdays; on Saturdays it opens at ten.","ssml":"<speak>Our downtown store opens at nine and closes at six on weekdays; on Saturdays it opens at ten.</speak>"},`+
			`"reprompt":{"displayText":"Is there anything else?","ssml":"<speak>Is there anything else?</speak>"},`+
			`"displays":[{"type":"LIST","title":"Stores","items":[{"title":"Downtown","token":"downtown","description":"142 Market Street"},{"title":"Riverside","token":"riverside","description":"8 Quay Road"}]}]}]},`+
			`"forward":{"HelpIntent":[{"intentId":"HelpIntent","type":"START"}],"StopIntent":[{"intentId":"StopIntent"}]},`+
			`"utterancePatterns":["when are you open","opening hours","what time do you close"],"data":{"category":"hours","weight":%d}}`, i, i, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

type endpoint struct {
	name    string
	urls    []string
	ceiling string // the static route, serving a body of the same size
}

type result struct {
	max, ceiling []float64 // requests/s per run
	maxP50       []time.Duration
	maxP99       []time.Duration
	ceilingP99   []time.Duration
	half         *loadgen.Report
	bodyBytes    int
}

// suite is what one benchmark measures.
type suite struct {
	concurrency int
	bundle      func() ([]byte, error)
	app         string
	// endpoints lists the loops; each endpoint's first URL gives the size
	// of its ceiling's body.
	endpoints func(apiURL string) ([]endpoint, error)
	// halfLoad runs an open loop at half the maximum and judges p99 there;
	// otherwise p99 of the closed loop is judged.
	halfLoad bool
	goals    func(name string) (ratio float64, p99 time.Duration)
	// backend is the content database: sqlite or postgres.
	backend string
	// encoder is the api's ENCODER_DIR ("" for its default).
	encoder string
	// semantic, when set, is a URL whose answers say how they were
	// ranked (X-Retrieval): the run waits for ranking by meaning, times
	// it at the start and after a restart, and reports peak memory.
	semantic func(apiURL string) string
}

func contentSuite() suite {
	return suite{
		concurrency: 64,
		bundle:      func() ([]byte, error) { return handlerBundle(handlers), nil },
		app:         "bench-app",
		endpoints: func(apiURL string) ([]endpoint, error) {
			var ids []string
			for i := range handlers {
				ids = append(ids, apiURL+fmt.Sprintf("/cms/handler/Intent%03d", i))
			}
			return []endpoint{
				{name: "GET /cms/handler/{id}", urls: ids},
				{name: "GET /cms/handler (100 handlers)", urls: []string{apiURL + "/cms/handler"}},
			}, nil
		},
		halfLoad: true,
		goals:    func(string) (float64, time.Duration) { return goalCeilingRatio, goalHalfLoadP99 },
	}
}

func run(ctx context.Context, log *slog.Logger, s suite, d time.Duration, runs, conc int) error {
	dir, err := os.MkdirTemp("", "cms-apibench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "api")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/api")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	db := filepath.Join(dir, "cms.db")
	if s.backend == "postgres" {
		if err := devpostgres.Install(ctx, os.Stderr); err != nil {
			return err
		}
		// Its own directory, which the server's system user is given.
		pgDir, err := os.MkdirTemp("", "cms-apibench-pg-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(pgDir)
		pg, err := devpostgres.Start(ctx, devpostgres.Options{Dir: pgDir})
		if err != nil {
			return err
		}
		defer pg.Stop()
		db = pg.DSN(pg.Database())
	}
	bundlePath := filepath.Join(dir, "bundle.json")
	bundleBytes, err := s.bundle()
	if err != nil {
		return err
	}
	if err := os.WriteFile(bundlePath, bundleBytes, 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, bin, "-content-db", db, "import", bundlePath).CombinedOutput(); err != nil {
		return fmt.Errorf("import: %w: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "-content-db", db, "token", "create", "--app", s.app, "--quiet").Output()
	if err != nil {
		return fmt.Errorf("create a token: %w", err)
	}
	token := strings.TrimSpace(string(out))

	apiAddr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	apiURL := "http://" + apiAddr
	start := func() (*childproc.Proc, time.Duration, error) {
		cmd := exec.Command(bin, "-content-db", db, "-log-level", "warn", "serve", "-addr", apiAddr)
		cmd.Env = append(os.Environ(), "RATE_LIMIT_RPS=0")
		if s.encoder != "" {
			cmd.Env = append(cmd.Env, "ENCODER_DIR="+s.encoder)
		}
		cmd.Stderr = os.Stderr
		began := time.Now()
		api, err := childproc.Start("api", cmd)
		if err != nil {
			return nil, 0, err
		}
		if err := childproc.WaitOK(ctx, apiURL+"/readyz", 30*time.Second); err != nil {
			api.Stop(syscall.SIGTERM, 10*time.Second)
			return nil, 0, err
		}
		if s.semantic == nil || s.encoder == "off" {
			return api, 0, nil
		}
		if err := waitHybrid(ctx, s.semantic(apiURL), token); err != nil {
			api.Stop(syscall.SIGTERM, 10*time.Second)
			return nil, 0, err
		}
		return api, time.Since(began), nil
	}
	api, firstBuild, err := start()
	if err != nil {
		return err
	}
	var restartBuild time.Duration
	if firstBuild > 0 {
		log.Info("answers ranked by meaning", "after", firstBuild.Round(time.Millisecond))
		if err := api.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
			return fmt.Errorf("stop the api: %w", err)
		}
		if api, restartBuild, err = start(); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		log.Info("after a restart, answers ranked by meaning", "after", restartBuild.Round(time.Millisecond))
	}
	defer func() { api.Stop(syscall.SIGTERM, 10*time.Second) }()

	// Bodies the API answers, for ceilings of the same size.
	fetch := func(url string) ([]byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		return io.ReadAll(resp.Body)
	}
	eps, err := s.endpoints(apiURL)
	if err != nil {
		return err
	}
	results := make([]result, len(eps))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for i := range eps {
		body, err := fetch(eps[i].urls[0])
		if err != nil {
			return err
		}
		results[i].bodyBytes = len(body)
		file := filepath.Join(dir, "static-"+strconv.Itoa(i))
		if err := os.WriteFile(file, body, 0o644); err != nil {
			return err
		}
		addr, err := childproc.FreeAddr()
		if err != nil {
			return err
		}
		c := exec.Command(self, "-serve-static", file, "-addr", addr)
		c.Stderr = os.Stderr
		p, err := childproc.Start("ceiling", c)
		if err != nil {
			return err
		}
		defer p.Stop(syscall.SIGTERM, 10*time.Second)
		if err := childproc.WaitOK(ctx, "http://"+addr+"/static", 30*time.Second); err != nil {
			return err
		}
		eps[i].ceiling = "http://" + addr + "/static"
	}
	client := loadgen.NewClient(conc)
	loop := func(urls []string, rate float64, tok string) (*loadgen.Report, error) {
		r, err := loadgen.RunHTTP(ctx, loadgen.HTTPConfig{GetURLs: urls, Token: tok, Concurrency: conc, Duration: d, Rate: rate, Client: client})
		if err != nil {
			return nil, err
		}
		if r.Failed > 0 {
			return nil, fmt.Errorf("%d of %d requests failed: %v", r.Failed, r.Requests, r.FailedOutcomes())
		}
		return r, nil
	}
	rps := func(r *loadgen.Report) float64 { return float64(r.OK) / r.Elapsed.Seconds() }
	// Warm connections and caches.
	for _, ep := range eps {
		if _, err := loadgen.RunHTTP(ctx, loadgen.HTTPConfig{GetURLs: ep.urls, Token: token, Concurrency: conc, Duration: time.Second, Client: client}); err != nil {
			return err
		}
	}
	for i := range runs {
		for e, ep := range eps {
			log.Info("run", "n", i+1, "endpoint", ep.name)
			m, err := loop(ep.urls, 0, token)
			if err != nil {
				return fmt.Errorf("%s: %w", ep.name, err)
			}
			c, err := loop([]string{ep.ceiling}, 0, "")
			if err != nil {
				return fmt.Errorf("ceiling of %s: %w", ep.name, err)
			}
			r := &results[e]
			r.max, r.ceiling = append(r.max, rps(m)), append(r.ceiling, rps(c))
			r.maxP50, r.maxP99 = append(r.maxP50, m.Latency.P50), append(r.maxP99, m.Latency.P99)
			r.ceilingP99 = append(r.ceilingP99, c.Latency.P99)
			log.Info("measured", "endpoint", ep.name, "max_rps", int(rps(m)), "ceiling_rps", int(rps(c)))
		}
	}
	for e, ep := range eps {
		if !s.halfLoad {
			break
		}
		rate := median(results[e].max) / 2
		log.Info("half load", "endpoint", ep.name, "rate", int(rate))
		h, err := loop(ep.urls, rate, token)
		if err != nil {
			return fmt.Errorf("half load of %s: %w", ep.name, err)
		}
		results[e].half = h
	}
	report(s, eps, results, conc, d, runs)
	if s.semantic != nil {
		peak, err := peakMemory(api.PID())
		if err != nil {
			return err
		}
		ranking := "lexical only (ENCODER_DIR=off)"
		if s.encoder != "off" {
			ranking = fmt.Sprintf("lexical and by meaning; first answer by meaning %s after the start, %s after a restart", firstBuild.Round(100*time.Millisecond), restartBuild.Round(100*time.Millisecond))
		}
		fmt.Printf("\nRanking: %s. Peak resident memory of api serve: %d MiB.\n", ranking, peak>>20)
	}
	return nil
}

// waitHybrid polls url until its answer is ranked by meaning as well as
// words, which needs the content's vectors.
func waitHybrid(ctx context.Context, url, token string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch mode := resp.Header.Get("X-Retrieval"); {
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		case mode == "hybrid":
			return nil
		case mode == "":
			return fmt.Errorf("GET %s: no X-Retrieval header: the api ranks lexically only", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no answer ranked by meaning from %s within 30 minutes", url)
}

// peakMemory is the peak resident set of process pid (VmHWM), in bytes.
func peakMemory(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the api's peak memory: %w", err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read the api's peak memory: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read the api's peak memory: no VmHWM in /proc/%d/status", pid)
}

func median[T int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(s suite, eps []endpoint, results []result, conc int, d time.Duration, runs int) {
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("\nContent API on loopback, content database %s, concurrency %d, %d runs of %s (medians).\n\n", s.backend, conc, runs, d)
	head := "| endpoint | body | requests/s | p50 | p99 | ceiling requests/s | ceiling p99 | api / ceiling |"
	rule := "|---|---:|---:|---:|---:|---:|---:|---:|"
	if s.halfLoad {
		head, rule = head+" half-load rate | half-load p99 |", rule+"---:|---:|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	var goals []string
	for e, ep := range eps {
		r := results[e]
		ratio := median(r.max) / median(r.ceiling)
		fmt.Printf("| %s | %d B | %.0f | %s | %s | %.0f | %s | %.0f%% |", ep.name, r.bodyBytes,
			median(r.max), median(r.maxP50).Round(10*time.Microsecond), median(r.maxP99).Round(10*time.Microsecond),
			median(r.ceiling), median(r.ceilingP99).Round(10*time.Microsecond), 100*ratio)
		goalRatio, goalP99 := s.goals(ep.name)
		p99, where := median(r.maxP99), "at concurrency "+strconv.Itoa(conc)
		if s.halfLoad {
			fmt.Printf(" %.0f/s | %s |", r.half.TargetRate, r.half.Latency.P99.Round(10*time.Microsecond))
			p99, where = r.half.Latency.P99, "at half load"
		}
		fmt.Println()
		if goalRatio > 0 {
			goals = append(goals, fmt.Sprintf("- %s: at least %.0f%% of the ceiling: %s (%.0f%%)", ep.name, 100*goalRatio, met(ratio >= goalRatio), 100*ratio))
		}
		goals = append(goals, fmt.Sprintf("- %s: p99 under %s %s: %s (%s)", ep.name, goalP99, where, met(p99 < goalP99), p99.Round(10*time.Microsecond)))
	}
	fmt.Println()
	fmt.Println(strings.Join(goals, "\n"))
}
