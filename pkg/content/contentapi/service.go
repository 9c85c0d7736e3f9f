package contentapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/graphql"
	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/schemas/openapi"
)

// ServiceConfig is everything the api process serves with.
type ServiceConfig struct {
	API           Config
	GraphQL       graphql.Limits
	TokenCacheTTL time.Duration
	// AuthFailureRate and AuthFailureBurst bound the failed
	// authentications of one client network (auth.Options), whose
	// network is the peer's or, from TrustedProxies, the one they name.
	AuthFailureRate  float64
	AuthFailureBurst int
	TrustedProxies   []netip.Prefix
	RateLimitRPS     float64
	RateLimitBurst   int
	ShutdownTimeout  time.Duration
	// Registry collects the service's metrics, which /metrics serves;
	// nil: a new one (httpserve.NewRegistry). The process that starts the
	// api passes its own to read them too (the status page charts them).
	Registry *prometheus.Registry
	// Pages are more GET routes served beside the content routes: the
	// operator pages (/status, /analytics), which the process that starts
	// the api builds, so that this package knows nothing of what they
	// read. Operator paths answer on the operator address only.
	Pages []Page
	// Authorized are more GET routes served beside the content routes,
	// each needing a scope of its own, whose handlers the process builds
	// (the live view of events); the service checks their tokens as it
	// checks the content routes'.
	Authorized []AuthorizedRoute
	// HTTP bounds what one client connection may cost; zero fields take
	// httpserve's defaults.
	HTTP httpserve.Limits
	// CORS lets pages on other origins call from a browser; nil allows
	// none. It wraps the engine, so that preflights of every route are
	// answered before Gin's routing would refuse OPTIONS with 405.
	CORS *cors.Policy
	// Retention prunes content history while the service runs.
	Retention Retention
	// OnChange, when set, is told after each change made through this
	// process: the webhook deliverer's Wake, so that what the change
	// queued is sent at once.
	OnChange func()
}

// Retention is how long content history is kept (see
// content.Store.PruneHistory): every Interval (zero: never), revisions
// and audit entries older than Age go, each record's Keep newest aside.
// Replicas may all prune: what one removed the others find gone.
type Retention struct {
	Age      time.Duration
	Keep     int
	Interval time.Duration
}

// HistoryPruner is a store that prunes content history.
type HistoryPruner interface {
	PruneHistory(ctx context.Context, before time.Time, keep int) (content.Pruned, error)
}

// Page is a GET route the service serves beside the content routes.
type Page struct {
	Path    string
	Handler http.Handler
}

// pingWithin fails readiness only once the store has not answered for
// longer than grace: until then the api answers from its cache, and
// taking it out of rotation sooner would drop exactly the answers the
// grace is for.
func pingWithin(ping func(context.Context) error, grace time.Duration, now func() time.Time) func(context.Context) error {
	var mu sync.Mutex
	var answered time.Time
	return func(ctx context.Context) error {
		err := ping(ctx)
		mu.Lock()
		defer mu.Unlock()
		switch t := now(); {
		case err == nil:
			answered = t
		case !answered.IsZero() && t.Sub(answered) < grace:
			return nil
		}
		return err
	}
}

// ServiceStore is what the service needs from the content database.
type ServiceStore interface {
	Store
	graphql.Store
	Ping(ctx context.Context) error
}

// RevisionWatcher is a store that tells when another process changed an
// app, so that replicas see changes at once rather than at their next
// revision check. An empty app ID means any app may have changed (the
// watch was interrupted).
type RevisionWatcher interface {
	WatchRevisions(ctx context.Context, changed func(appID string), failed func(error)) error
}

// Service is a running api process: the content routes plus /metrics,
// /healthz, /readyz and the Pages of its configuration.
type Service struct {
	cfg     ServiceConfig
	log     *slog.Logger
	server  *http.Server
	checker *httpserve.Checker
	api     *API
	engine  *gin.Engine
	handler http.Handler
	graphql *graphql.Handler
	watcher RevisionWatcher
	pruner  HistoryPruner
}

// GraphQL is the GraphQL endpoint, for printing its schema.
func (s *Service) GraphQL() *graphql.Handler { return s.graphql }

// NewService builds the HTTP server.
func NewService(cfg ServiceConfig, store ServiceStore, log *slog.Logger) (*Service, error) {
	grace := cfg.API.OutageGrace
	switch {
	case grace == 0:
		grace = auth.DefaultOutageGrace
	case grace < 0:
		grace = 0
	}
	// Tokens get the same grace as content: a cached answer is no use if
	// the token asking for it can no longer be checked.
	authn, err := auth.NewAuthenticator(store, auth.Options{CacheTTL: cfg.TokenCacheTTL, OutageGrace: grace,
		FailureRate: cfg.AuthFailureRate, FailureBurst: cfg.AuthFailureBurst})
	if err != nil {
		return nil, err
	}
	limiter := ratelimit.Optional(cfg.RateLimitRPS, cfg.RateLimitBurst)
	reg := cfg.Registry
	if reg == nil {
		reg = httpserve.NewRegistry()
	}
	metrics := NewMetrics(reg)

	checker := httpserve.NewChecker()
	checker.Add("content_db", pingWithin(store.Ping, grace, time.Now))

	api := New(cfg.API, store, authn, limiter, log)
	api.retrieval = metrics.retrieval
	registerStateMetrics(reg, api.cache)
	// Gin's debug mode prints every route to stdout; the mode is Gin's own
	// process-wide setting.
	gin.SetMode(gin.ReleaseMode)
	engine := gin.New()
	engine.HandleMethodNotAllowed = true
	engine.Use(observe(metrics, log), recovery(log), origin(cfg.TrustedProxies))
	engine.NoRoute(notFound)
	engine.NoMethod(notAllowed)
	api.Register(engine)
	changed := api.ChangedBy
	if cfg.OnChange != nil {
		changed = func(appID, tokenID string) {
			api.ChangedBy(appID, tokenID)
			cfg.OnChange()
		}
	}
	gh, err := graphql.New(cfg.GraphQL, store, authn, limiter, changed, log)
	if err != nil {
		return nil, err
	}
	gh.OnQueued(cfg.OnChange)
	engine.POST("/cms/graphql", gin.WrapH(gh))
	engine.GET("/cms/graphql", gin.WrapH(gh))
	engine.GET(graphql.AssetsPath+"*file", gin.WrapH(graphql.Assets()))
	httpserve.Mount(func(path string, h http.Handler) { engine.GET(path, gin.WrapH(h)) }, reg, checker)
	engine.GET(openapi.Path, gin.WrapH(openapi.Handler()))
	for _, p := range cfg.Pages {
		engine.GET(p.Path, gin.WrapH(p.Handler))
	}
	for _, rt := range cfg.Authorized {
		engine.GET(rt.Path, api.authorized(rt))
	}

	handler := cfg.CORS.Handler(engine)
	srv := httpserve.NewServer(handler, cfg.HTTP.Or(httpserve.DefaultLimits()), log)
	svc := &Service{cfg: cfg, log: log, server: srv, checker: checker, api: api, engine: engine, handler: handler, graphql: gh}
	if w, ok := store.(RevisionWatcher); ok {
		svc.watcher = w
	}
	if p, ok := store.(HistoryPruner); ok && cfg.Retention.Interval > 0 {
		svc.pruner = p
	}
	return svc, nil
}

// Handler is the service's HTTP handler, for tests and for serving on
// listeners the caller owns.
func (s *Service) Handler() http.Handler { return s.handler }

// API is the content endpoints, for callers that change content and must
// make the change visible at once.
func (s *Service) API() *API { return s.api }

// Serve answers requests on ln until ctx is cancelled, then shuts down
// gracefully: readiness fails at once and requests in flight finish.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	timeout := s.cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	if s.watcher != nil {
		bg.Go(func() {
			failed := func(err error) {
				s.log.Warn("watching content changes: connection lost; reconnecting (until then changes by other replicas show within the refresh interval)", "err", err)
			}
			if err := s.watcher.WatchRevisions(sctx, s.api.Invalidate, failed); err != nil && sctx.Err() == nil {
				s.log.Error("watching content changes stopped; changes by other replicas show within the refresh interval", "err", err)
			}
		})
	}
	if s.pruner != nil {
		bg.Go(func() { s.pruneHistory(sctx) })
	}
	// The watcher and the pruner end before Serve returns.
	defer func() { stop(); bg.Wait() }()
	if err := httpserve.Serve(ctx, s.log, "api", s.server, ln, s.checker, timeout); err != nil {
		return err
	}
	s.log.Info("api stopped")
	return nil
}

// registerStateMetrics exports what the api keeps per app against its
// budget (AppStateBudget), read when scraped.
func registerStateMetrics(reg prometheus.Registerer, c *cache) {
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "cms", Subsystem: "api", Name: name, Help: help}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(opts("app_state_bytes", "Estimated bytes of per-app state held (search indexes, vectors, rendered answers)."),
			func() float64 { return float64(c.stats().bytes) }),
		prometheus.NewGaugeFunc(opts("app_state_apps", "Apps whose state is held in memory."),
			func() float64 { return float64(c.stats().apps) }),
		prometheus.NewGaugeFunc(opts("app_state_budget_bytes", "Bound on the bytes of per-app state (APP_STATE_BUDGET_BYTES); 0: none."),
			func() float64 { return float64(c.stats().budget) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "cms", Subsystem: "api", Name: "app_state_evictions_total",
			Help: "Apps whose state was evicted to keep within the budget, to be loaded again on their next request."},
			func() float64 { return float64(c.stats().evictions) }),
	)
}

// pruneHistory prunes content history at once, then every interval,
// until ctx ends.
func (s *Service) pruneHistory(ctx context.Context) {
	r := s.cfg.Retention
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		start := time.Now()
		p, err := s.pruner.PruneHistory(ctx, start.Add(-r.Age), r.Keep)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("pruning content history failed; trying again at the next interval", "err", err, "pruned_revisions", p.Revisions)
		default:
			s.log.Info("content history pruned", "revisions", p.Revisions, "audit_entries", p.Entries, "versions", p.Versions, "webhook_deliveries", p.Deliveries, "older_than", r.Age.String(), "elapsed", time.Since(start).Round(time.Millisecond).String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
