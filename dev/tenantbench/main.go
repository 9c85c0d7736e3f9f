// Command tenantbench measures one api serving many apps within its
// budget of per-app state (APP_STATE_BUDGET_BYTES):
//
//	go run ./dev/tenantbench [-apps 1000] [-docs 200] [-budget 0] [-duration 10s]
//
// It builds cmd/api and fills a new SQLite content database with -apps
// apps of -docs documents and 10 FAQs each, taken in turn from the
// evaluation corpus (pkg/content/knowledge/testdata/eval), each app's
// title marked with its ID. The content's vectors are written through
// the store as the api's build stores them (the texts the built-in
// encoder's plan gives, under its model name), from hashed words rather
// than the encoder itself: encoding 200,000 documents would take hours
// on two cores, and what is measured is memory and loading, not ranking
// quality. Questions are embedded by the real encoder.
//
// Then it starts "api serve" with rate limiting off and:
//
//  1. warms ten apps, and measures a hot app's search latency at -rate
//     searches a second (an open loop, at most -concurrency outstanding)
//     for -duration, after a second unmeasured (few apps held);
//  2. asks every app one question, in order (first search of an app
//     never served), checking each is answered by meaning;
//  3. asks the first -returning apps again, one at a time: they were
//     evicted, and are reloaded from the database and its stored vectors;
//  4. measures the hot app again, the same way, while a stream of other
//     returning apps is asked beside it;
//
// and reports the api's peak resident memory (VmHWM), its state bytes,
// evictions, and the latencies, against the goals: 1 GiB, returning p99
// under 250 ms, hot p99 within 20% (or 5 ms) of step 1.
//
// The hot app is asked at a fixed rate, not in a closed loop, because
// the goal is its latency beside the reloads: a closed loop keeps the
// cores busy whatever runs beside it, so any work beside it lowers the
// loop's rate and raises its latency by Little's law (-rate 0 runs one
// all the same).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// The goals the report is held against.
const (
	goalRSS          = 1 << 30
	goalReturningP99 = 250 * time.Millisecond
	goalHotSlack     = 1.2
	goalHotFloor     = 5 * time.Millisecond
	hotWarmUp        = time.Second
	faqsPerApp       = 10
	warmApps         = 10
	evalContent      = "pkg/content/knowledge/testdata/eval/content.json"
	evalQuestions    = "pkg/content/knowledge/testdata/eval/questions.json"
	org              = "bench-org"
)

type options struct {
	apps, docs, returning, concurrency int
	rate                               float64
	budget                             int64
	duration                           time.Duration
	keep                               string
}

func main() {
	var o options
	flag.IntVar(&o.apps, "apps", 1000, "apps to serve")
	flag.IntVar(&o.docs, "docs", 200, "documents per app")
	flag.Int64Var(&o.budget, "budget", 0, "APP_STATE_BUDGET_BYTES of the api (0: its default)")
	flag.IntVar(&o.returning, "returning", 200, "evicted apps asked again, one at a time")
	flag.Float64Var(&o.rate, "rate", 300, "searches a second of the hot app (0: a closed loop of -concurrency)")
	flag.IntVar(&o.concurrency, "concurrency", 32, "requests of the hot app outstanding at most")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each hot-app loop")
	flag.StringVar(&o.keep, "db", "", "content database to use; filled when it does not exist, kept after (empty: a temporary one)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, o); err != nil {
		log.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, o options) error {
	dir, err := os.MkdirTemp("", "cms-tenantbench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := childproc.GoBuild(ctx, dir, "./cmd/api"); err != nil {
		return err
	}
	bin := filepath.Join(dir, "api")
	questions, err := readQuestions()
	if err != nil {
		return err
	}
	db := o.keep
	if db == "" {
		db = filepath.Join(dir, "cms.db")
	}
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		start := time.Now()
		if err := fill(ctx, log, db, o); err != nil {
			return err
		}
		log.Info("content database filled", "apps", o.apps, "documents", o.apps*o.docs, "took", time.Since(start).Round(time.Second))
	}
	out, err := exec.CommandContext(ctx, bin, "-content-db", db, "token", "create", "--org", org, "--quiet").Output()
	if err != nil {
		return fmt.Errorf("create a token: %w", err)
	}
	token := strings.TrimSpace(string(out))

	addr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	apiURL := "http://" + addr
	opAddr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "-content-db", db, "-log-level", "warn", "serve", "-addr", addr, "-operator-addr", opAddr)
	cmd.Env = append(os.Environ(), "RATE_LIMIT_RPS=0")
	if o.budget != 0 {
		cmd.Env = append(cmd.Env, "APP_STATE_BUDGET_BYTES="+strconv.FormatInt(o.budget, 10))
	}
	cmd.Stderr = os.Stderr
	api, err := childproc.Start("api", cmd)
	if err != nil {
		return err
	}
	defer api.Stop(syscall.SIGTERM, 10*time.Second)
	if err := childproc.WaitOK(ctx, apiURL+"/readyz", 60*time.Second); err != nil {
		return err
	}
	b := &bench{ctx: ctx, apiURL: apiURL, opURL: "http://" + opAddr, token: token, questions: questions, client: &http.Client{Timeout: 30 * time.Second},
		hot: loadgen.NewClient(o.concurrency)}

	// 1. A few apps held; the hot app's loop.
	for i := range warmApps {
		if _, err := b.first(i, 30*time.Second); err != nil {
			return err
		}
	}
	hotBefore, err := b.hotLoop(o, nil)
	if err != nil {
		return fmt.Errorf("hot app, few apps: %w", err)
	}
	log.Info("hot app with few apps held", "p50", hotBefore.P50, "p99", hotBefore.P99, "requests", hotBefore.Count)

	// 2. Every app once.
	var fresh []time.Duration
	for i := warmApps; i < o.apps; i++ {
		d, err := b.first(i, 30*time.Second)
		if err != nil {
			return err
		}
		fresh = append(fresh, d)
		if i%100 == 0 {
			m, _ := b.metrics()
			log.Info("serving every app", "done", i, "state_bytes", m["cms_api_app_state_bytes"], "apps_held", m["cms_api_app_state_apps"], "evictions", m["cms_api_app_state_evictions_total"])
		}
	}
	// 3. Returning apps, one at a time: the first ones served, evicted
	// since when the state outgrew the budget.
	half := min(o.returning, o.apps/2)
	var returning []time.Duration
	for i := range half {
		d, err := b.first(1+i, 0) // app 0 is the hot one
		if err != nil {
			return fmt.Errorf("returning: %w", err)
		}
		returning = append(returning, d)
	}
	// 4. The hot app beside a stream of returning apps.
	var during []time.Duration
	stream := func(ctx context.Context) error {
		for i := 1 + half; ctx.Err() == nil && i < o.apps; i++ {
			d, err := b.first(i, 0)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			during = append(during, d)
		}
		return nil
	}
	hotAfter, err := b.hotLoop(o, stream)
	if err != nil {
		return fmt.Errorf("hot app beside returning apps: %w", err)
	}
	peak, err := procStatus(api.PID(), "VmHWM:")
	if err != nil {
		return err
	}
	rss, err := procStatus(api.PID(), "VmRSS:")
	if err != nil {
		return err
	}
	m, err := b.metrics()
	if err != nil {
		return err
	}
	report(o, m, peak, rss, hotBefore, hotAfter, latency(fresh), latency(returning), latency(during))
	return nil
}

type bench struct {
	ctx       context.Context
	apiURL    string
	opURL     string // the operator address, of /metrics
	token     string
	questions []string
	client    *http.Client
	hot       *http.Client // the hot app's, kept between loops: its connections stay open
}

func (b *bench) searchURL(app, q int) string {
	return fmt.Sprintf("%s/cms/search?appId=app-%d&question=%s", b.apiURL, app, url.QueryEscape(b.questions[q%len(b.questions)]))
}

// first asks app a question and times the answer, which must be ranked
// by meaning and hold the app's own documents. Within wait, an answer
// ranked by words alone (the vectors still loading) is asked again.
func (b *bench) first(app int, wait time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(wait)
	for {
		req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.searchURL(app, app), nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+b.token)
		start := time.Now()
		resp, err := b.client.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf("[app-%d]", app)) {
			return 0, fmt.Errorf("app-%d: %d %.300s", app, resp.StatusCode, body)
		}
		if mode := resp.Header.Get("X-Retrieval"); mode == "hybrid" {
			return took, nil
		} else if time.Now().After(deadline) {
			return 0, fmt.Errorf("app-%d answered %q, not by meaning", app, mode)
		}
		time.Sleep(100 * time.Millisecond) // the vectors load in the background
	}
}

// hotLoop runs the hot app's closed loop, with beside running meanwhile
// when set, and returns its latencies.
func (b *bench) hotLoop(o options, beside func(context.Context) error) (loadgen.Latency, error) {
	var urls []string
	for q := range b.questions {
		urls = append(urls, b.searchURL(0, q))
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var wg sync.WaitGroup
	var besideErr error
	if beside != nil {
		wg.Go(func() { besideErr = beside(ctx) })
	}
	cfg := loadgen.HTTPConfig{GetURLs: urls, Token: b.token, Concurrency: o.concurrency, Duration: hotWarmUp, Rate: o.rate, Client: b.hot}
	// Unmeasured at first: the connections are opened, and the loop
	// reaches its rate, before latencies count.
	_, err := loadgen.RunHTTP(ctx, cfg)
	var r *loadgen.Report
	if err == nil {
		cfg.Duration = o.duration
		r, err = loadgen.RunHTTP(ctx, cfg)
	}
	cancel()
	wg.Wait()
	if err != nil {
		return loadgen.Latency{}, err
	}
	if besideErr != nil {
		return loadgen.Latency{}, besideErr
	}
	if r.Failed > 0 {
		return loadgen.Latency{}, fmt.Errorf("%d of %d requests failed: %v", r.Failed, r.Requests, r.FailedOutcomes())
	}
	return r.Latency, nil
}

// metrics reads the api's state gauges.
func (b *bench) metrics() (map[string]float64, error) {
	resp, err := b.client.Get(b.opURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(name, "cms_api_app_state_") {
			out[name], _ = strconv.ParseFloat(value, 64)
		}
	}
	return out, nil
}

func latency(ds []time.Duration) loadgen.Latency {
	slices.Sort(ds)
	l := loadgen.Latency{Count: len(ds), P50: loadgen.Percentile(ds, 50), P90: loadgen.Percentile(ds, 90), P99: loadgen.Percentile(ds, 99)}
	if len(ds) > 0 {
		l.Max = ds[len(ds)-1]
	}
	return l
}

func report(o options, m map[string]float64, peak, rss int64, hotBefore, hotAfter, fresh, returning, during loadgen.Latency) {
	mib := func(n float64) string { return fmt.Sprintf("%.0f MiB", n/(1<<20)) }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	hotGoal := max(time.Duration(float64(hotBefore.P99)*goalHotSlack), hotBefore.P99+goalHotFloor)
	loop := fmt.Sprintf("%.0f searches a second (at most %d outstanding)", o.rate, o.concurrency)
	if o.rate == 0 {
		loop = fmt.Sprintf("a closed loop of %d", o.concurrency)
	}
	fmt.Printf("\n%d apps × %d documents (+%d FAQs each), budget %s, hot app at %s for %s after %s unmeasured\n\n",
		o.apps, o.docs, faqsPerApp, mib(m["cms_api_app_state_budget_bytes"]), loop, o.duration, hotWarmUp)
	fmt.Println("| measure | value | goal |")
	fmt.Println("|---|---:|---|")
	fmt.Printf("| peak resident memory (VmHWM) | %s | under 1 GiB: %s |\n", mib(float64(peak)), met(peak < goalRSS))
	fmt.Printf("| resident memory at the end (VmRSS) | %s | |\n", mib(float64(rss)))
	fmt.Printf("| per-app state held / apps held | %s / %.0f | within the budget: %s |\n", mib(m["cms_api_app_state_bytes"]), m["cms_api_app_state_apps"],
		met(m["cms_api_app_state_bytes"] <= m["cms_api_app_state_budget_bytes"]))
	fmt.Printf("| apps evicted | %.0f | |\n", m["cms_api_app_state_evictions_total"])
	fmt.Printf("| first search of an app never served: p50 / p99 (%d) | %s / %s | |\n", fresh.Count, ms(fresh.P50), ms(fresh.P99))
	fmt.Printf("| first search of a returning (evicted) app: p50 / p99 (%d) | %s / %s | p99 under 250 ms: %s |\n", returning.Count, ms(returning.P50), ms(returning.P99), met(returning.P99 < goalReturningP99))
	fmt.Printf("| the same beside the hot loop: p50 / p99 (%d) | %s / %s | |\n", during.Count, ms(during.P50), ms(during.P99))
	fmt.Printf("| hot app, few apps held: p50 / p99 (%d) | %s / %s | |\n", hotBefore.Count, ms(hotBefore.P50), ms(hotBefore.P99))
	fmt.Printf("| hot app beside returning apps, every app served: p50 / p99 (%d) | %s / %s | p99 under %s: %s |\n", hotAfter.Count, ms(hotAfter.P50), ms(hotAfter.P99), ms(hotGoal), met(hotAfter.P99 <= hotGoal))
}

// fill makes the content database: the apps' records, imported, and
// their content's vectors, stored as the api's build would store them.
func fill(ctx context.Context, log *slog.Logger, db string, o options) error {
	f, err := os.Open(evalContent)
	if err != nil {
		return err
	}
	file, err := bundle.Read(f, bundle.JSON)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", evalContent, err)
	}
	byKind := map[content.Kind][]content.Record{}
	for _, r := range file.Bundle.Records {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	docs, faqs := byKind[content.KindDocument], byKind[content.KindFAQ]
	if len(docs) == 0 || len(faqs) == 0 {
		return fmt.Errorf("%s holds no documents or FAQs", evalContent)
	}
	store, err := contentdb.OpenDB(ctx, db)
	if err != nil {
		return err
	}
	defer store.Close()
	dir, _ := encoder.Locate()
	enc, err := encoder.Load(dir)
	if err != nil {
		return fmt.Errorf("the sentence encoder (deploy/install-encoder), whose tokens plan the vectors: %w", err)
	}
	vecs := embeddings.NewStored(store, hashed{model: enc.Model(), dim: enc.Dims()}, nil)
	const batch = 50
	for from := 0; from < o.apps; from += batch {
		b := &content.Bundle{Organizations: []tenancy.Organization{{ID: org, Name: "Bench"}}}
		apps := map[string]knowledge.Content{}
		for i := from; i < min(from+batch, o.apps); i++ {
			id := fmt.Sprintf("app-%d", i)
			b.Apps = append(b.Apps, tenancy.App{ID: id, OrganizationID: org, Name: "App " + strconv.Itoa(i), Doc: json.RawMessage(`{}`)})
			c := knowledge.Content{}
			for d := range o.docs {
				r, err := copyRecord(docs[(i*37+d)%len(docs)], id, "title", fmt.Sprintf("d%d", d))
				if err != nil {
					return err
				}
				c.Documents = append(c.Documents, r)
			}
			for q := range faqsPerApp {
				r, err := copyRecord(faqs[(i*11+q)%len(faqs)], id, "name", fmt.Sprintf("f%d", q))
				if err != nil {
					return err
				}
				c.FAQs = append(c.FAQs, r)
			}
			b.Records = append(append(b.Records, c.Documents...), c.FAQs...)
			apps[id] = c
		}
		if _, err := store.Import(tenancy.WithActor(ctx, tenancy.Actor{LocalUser: "tenantbench"}), b, nil); err != nil {
			return fmt.Errorf("import apps %d to %d: %w", from, from+len(b.Apps)-1, err)
		}
		// The vectors, on every core: the plan is the api's own (its
		// passages and leads, counted in the encoder's tokens).
		var wg sync.WaitGroup
		errs := make(chan error, len(apps))
		sem := make(chan struct{}, 2)
		for id, c := range apps {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				base, err := knowledge.New(c, knowledge.Options{Embedder: enc, ContentEmbedder: vecs, App: id})
				if err == nil {
					err = base.WaitSemantic(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("vectors of %s: %w", id, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		log.Info("filled", "apps", min(from+batch, o.apps))
	}
	return nil
}

// copyRecord is r as a record of app, its ID suffixed and its title
// field marked with the app, so that an answer tells whose it is.
func copyRecord(r content.Record, app, titleField, suffix string) (content.Record, error) {
	var doc map[string]any
	if err := json.Unmarshal(r.Doc, &doc); err != nil {
		return r, err
	}
	id := r.ID + "-" + suffix
	doc[r.Kind.IDField()] = id
	delete(doc, "appId") // the store's to fill in
	if t, ok := doc[titleField].(string); ok {
		doc[titleField] = t + " [" + app + "]"
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return r, err
	}
	r.AppID, r.ID, r.Doc = app, id, raw
	return r, nil
}

// hashed embeds a text as its hashed words: cheap, deterministic vectors
// of the encoder's dimension under its model name.
type hashed struct {
	model string
	dim   int
}

func (h hashed) Model() string { return h.model }

func (h hashed) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, h.dim)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			f := fnv.New64a()
			f.Write([]byte(w))
			x := f.Sum64()
			v[x%uint64(h.dim)] += 1
			v[(x>>32)%uint64(h.dim)] -= 0.5
		}
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if ss == 0 {
			v[0] = 1
			ss = 1
		}
		for j := range v {
			v[j] = float32(float64(v[j]) / math.Sqrt(ss))
		}
		out[i] = v
	}
	return out, nil
}

func readQuestions() ([]string, error) {
	raw, err := os.ReadFile(evalQuestions)
	if err != nil {
		return nil, err
	}
	var qs []struct {
		Question string `json:"question"`
		Target   string `json:"target"`
	}
	if err := json.Unmarshal(raw, &qs); err != nil {
		return nil, fmt.Errorf("%s: %w", evalQuestions, err)
	}
	var out []string
	for _, q := range qs {
		if q.Target == "search" {
			out = append(out, q.Question)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no search questions", evalQuestions)
	}
	return out, nil
}

// procStatus reads a size field of /proc/pid/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
