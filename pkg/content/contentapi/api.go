// Package contentapi serves the content of apps to assistant runtimes over
// HTTP with Gin: handlers, app information and entities, search, FAQ, RAG
// and suggestions, and the GraphQL endpoint, with bearer-token auth,
// ETags, per-token rate limits, request IDs and metrics.
//
// It serves the content routes only. What it reads beyond the content
// database comes through interfaces defined here (History, for the past
// queries HISTORICAL suggestions count), and the operator pages are
// Pages the caller mounts: the api's command assembles the process, so
// that this package imports no ClickHouse and no operator-page code.
package contentapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/auth/authhttp"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Store is what the API reads content from.
type Store interface {
	auth.Store
	RevisionSource
	AppByChannelKey(ctx context.Context, key string) (tenancy.App, string, error)
	Record(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error)
	ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error)
	// A published version of an app's content, as Record and
	// ListRecords read its draft.
	content.VersionReader
	Revisions(ctx context.Context, appID string, kind content.Kind, id string, before int64, limit int) ([]content.Revision, error)
	AuditLog(ctx context.Context, f content.AuditFilter) ([]content.AuditEntry, error)
}

// Config tunes the API.
type Config struct {
	// RefreshInterval bounds how long a change made by another process
	// takes to show: each app's revision is read at most this often.
	RefreshInterval time.Duration
	// OutageGrace is how long answers cached before the content store
	// became unreachable keep being served; zero means the default,
	// negative means none.
	OutageGrace time.Duration
	// CacheMaxAge is the max-age clients may cache responses for; zero
	// means the default, negative means none.
	CacheMaxAge time.Duration
	// History is where HISTORICAL suggestions come from; nil leaves them
	// out (and says so in a header).
	History History
	// HistoryRefresh is how long past queries are kept before being read
	// again.
	HistoryRefresh time.Duration
	// Generator, when set, writes RAG answers from the retrieved passages;
	// the extractive answer stands in when it fails.
	Generator knowledge.Generator
	// Knowledge is what search, FAQ matching and suggestions know beyond
	// each app's content (a lexicon of general English).
	Knowledge knowledge.Options
	// AppStateBudget bounds the bytes of what the api keeps per app
	// (its search indexes and vectors, rendered answers); past it the
	// apps used least recently are evicted and loaded again, from the
	// content database and its stored vectors, on their next request.
	// Zero means DefaultAppStateBudget, negative no bound.
	AppStateBudget int64
	// EmbedsOnCores says that Knowledge embeds questions on this
	// process's cores (the built-in encoder) rather than through an
	// endpoint: then a question's embedding takes its turn at the ranking
	// gate with its ranking.
	EmbedsOnCores bool
}

// Defaults for Config.
const (
	DefaultRefreshInterval = time.Second
	DefaultCacheMaxAge     = 10 * time.Second
	// DefaultAppStateBudget holds a few hundred apps of a few hundred
	// documents, or one of tens of thousands, in a quarter of a 1 GiB
	// replica: the heap grows to about twice what is live before it is
	// collected, and the sentence encoder takes its share.
	DefaultAppStateBudget = 256 << 20
)

// API is the content endpoints.
type API struct {
	cfg          Config
	history      *historyCache
	keys         *keyCache
	store        Store
	authn        authhttp.Authenticator
	limiter      *ratelimit.Limiter
	cache        *cache
	log          *slog.Logger
	cacheControl string
	// buffers hold encoded answers (*[]byte) between requests.
	buffers sync.Pool
	// retrieval counts answers by how they were ranked (see
	// RetrievalHeader); nil when nothing counts them.
	retrieval *prometheus.CounterVec
	// owed holds, by app, the *change (its token) the next index build
	// is charged to.
	owed sync.Map
	// retrievalLogged is when a failure of semantic retrieval was last
	// logged (Unix nanoseconds): an endpoint that is down fails every
	// question.
	retrievalLogged atomic.Int64
	// ranking lets as many searches, FAQ queries and suggestions rank at
	// once as there are cores, the others in turn.
	ranking *rankGate
	// building lets index builds and the background work of embedding
	// an app's content run on all cores but one, in turn.
	building *rankGate
}

// New returns the API. limiter may be nil to disable rate limiting.
func New(cfg Config, store Store, authn authhttp.Authenticator, limiter *ratelimit.Limiter, log *slog.Logger) *API {
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	switch {
	case cfg.OutageGrace == 0:
		cfg.OutageGrace = auth.DefaultOutageGrace
	case cfg.OutageGrace < 0:
		cfg.OutageGrace = 0
	}
	switch {
	case cfg.CacheMaxAge == 0:
		cfg.CacheMaxAge = DefaultCacheMaxAge
	case cfg.CacheMaxAge < 0:
		cfg.CacheMaxAge = 0
	}
	// Responses depend on the token, so only the client's own cache may
	// keep them; must-revalidate makes it ask again (cheaply, with the
	// ETag) once they are older than max-age.
	cc := "private, max-age=" + strconv.Itoa(int(cfg.CacheMaxAge/time.Second)) + ", must-revalidate"
	c := newCache(store, cfg.RefreshInterval, cfg.OutageGrace)
	switch {
	case cfg.AppStateBudget == 0:
		c.budget = DefaultAppStateBudget
	case cfg.AppStateBudget > 0:
		c.budget = cfg.AppStateBudget
	}
	history := newHistoryCache(cfg.History, cfg.HistoryRefresh)
	// What is kept of an evicted app elsewhere goes with it: its past
	// queries and its questions' vectors.
	forgetter, _ := cfg.Knowledge.Embedder.(interface{ Forget(app string) })
	c.evicted = func(apps []string) {
		history.forget(apps)
		for _, app := range apps {
			if forgetter != nil {
				forgetter.Forget(app)
			}
		}
	}
	return &API{cfg: cfg, history: history,
		keys:  &keyCache{store: store, ttl: cfg.RefreshInterval, entries: map[string]keyEntry{}},
		store: store, authn: authn, limiter: limiter, cache: c, log: log, cacheControl: cc,
		ranking: newRankGate(runtime.GOMAXPROCS(0)), building: newRankGate(runtime.GOMAXPROCS(0) - 1)}
}

// Invalidate makes the next read of the app see changes at once.
func (a *API) Invalidate(appID string) { a.cache.Invalidate(appID) } // "" for every app

// ChangedBy is Invalidate for a change a token made in this process: the
// index build the next read of the app needs is charged to that token,
// not to whoever reads first (often the app's runtime token, shared by
// every visitor of its page).
func (a *API) ChangedBy(appID, tokenID string) {
	if a.limiter != nil {
		a.owed.Store(appID, &change{token: tokenID})
	}
	a.Invalidate(appID)
}

// change is one change of an app's content, owed by its token until an
// index build with it is done. Each is its own value, so that a build
// clears only the change it was charged for, not a later one.
type change struct{ token string }

// Register adds the content routes to r.
func (a *API) Register(r gin.IRouter) {
	g := r.Group("/cms", a.authenticate)
	g.GET("/handler", a.list(content.KindHandler, "handlers"))
	g.GET("/handler/:id", a.one(content.KindHandler, "handler", "Handler not found."))
	g.GET("/entity", a.list(content.KindEntity, "entities"))
	g.GET("/entity/:id", a.one(content.KindEntity, "entity", "Entity not found."))
	g.GET("/app", a.app)
	g.GET("/search", a.search)
	g.GET("/faq/query", a.faq)
	g.GET("/rag", a.rag)
	// The channel key names the app, so this route resolves it itself.
	r.GET("/cms/suggestions", a.suggestions)
	// What content was, and who changed it, is for the app's authors.
	h := r.Group("/cms", a.authenticateFor(tenancy.ContentWrite, "reading content history"))
	h.GET("/history/:kind/:id", a.revisions)
	h.GET("/history/:kind/:id/diff", a.revisionDiff)
	h.GET("/audit", a.auditLog)
}

const targetKey = "cms.target"

// authenticate resolves the token and the app, and applies the rate limit.
func (a *API) authenticate(c *gin.Context) {
	p, ok := a.principal(c)
	if !ok {
		return
	}
	a.resolveQuery(c, p)
}

// authenticateFor is authenticate for routes that need the scope want.
func (a *API) authenticateFor(want tenancy.Scopes, need string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p, ok := a.principalFor(c, want, need); ok {
			a.resolveQuery(c, p)
		}
	}
}

// resolveQuery resolves the app the appId parameter names, if any.
func (a *API) resolveQuery(c *gin.Context, p auth.Principal) {
	appID, present := c.GetQuery("appId")
	if present && strings.TrimSpace(appID) == "" {
		abort(c, http.StatusBadRequest, "appId", "appId must not be empty.")
		return
	}
	a.resolve(c, p, appID)
}

// principal checks the token, the token's rate limit and the
// content:read scope; on failure it has answered.
func (a *API) principal(c *gin.Context) (auth.Principal, bool) {
	return a.principalFor(c, tenancy.ContentRead, "reading content")
}

// principalFor checks the token, the token's rate limit and the scope
// want, which need says what for; on failure it has answered.
func (a *API) principalFor(c *gin.Context, want tenancy.Scopes, need string) (auth.Principal, bool) {
	p, err := authhttp.Admit(c.Request.Context(), a.authn, a.limiter, c.Request.Header)
	if err != nil {
		a.authError(c, err)
		return p, false
	}
	if err := p.Require(want, need); err != nil {
		a.authError(c, err)
		return p, false
	}
	if a.limiter != nil {
		c.Request = c.Request.WithContext(withPayer(c.Request.Context(), payer{limiter: a.limiter, token: p.TokenID}))
	}
	return p, true
}

// resolve decides the app the request acts for; on failure it has
// answered.
func (a *API) resolve(c *gin.Context, p auth.Principal, appID string) bool {
	t, err := a.authn.Resolve(c.Request.Context(), p, appID)
	if err != nil {
		a.authError(c, err)
		return false
	}
	c.Set(targetKey, t)
	c.Set(logAppKey, t.AppID)
	return true
}

func (a *API) authError(c *gin.Context, err error) {
	refusal := authhttp.Refuse(err)
	if refusal.Err != nil {
		a.log.Error("authentication failed", "err", err, "request_id", c.GetString(requestIDKey))
	}
	refusal.Write(c.Writer)
	c.Abort()
}

func (a *API) serverError(c *gin.Context, what string, err error) {
	a.log.Error(what+" failed", "err", err, "request_id", c.GetString(requestIDKey))
	abort(c, http.StatusServiceUnavailable, "", "The content store is unavailable; try again later.")
}

func abort(c *gin.Context, status int, field, msg string) {
	httpserve.Error(c.Writer, status, field, msg)
	c.Abort()
}

// readsDraft says the target's token reads the draft of an app that
// publishes (see tenancy.Scopes.ReadsDraft); other tokens read its live
// version.
func readsDraft(t auth.Target) bool { return t.Scopes.ReadsDraft() }

// records reads version live of the content, the draft for zero.
func (a *API) records(live int64) content.RecordReader {
	return content.AtVersion(a.store, a.store, live)
}

func target(c *gin.Context) auth.Target {
	t, _ := c.Get(targetKey)
	return t.(auth.Target) // set by authenticate for every route
}

// list serves every record of a kind: {"<wrapper>": [...]}.
func (a *API) list(kind content.Kind, wrapper string) gin.HandlerFunc {
	return func(c *gin.Context) {
		t := target(c)
		b, err := a.cache.body(c.Request.Context(), t.AppID, wrapper, readsDraft(t), func(ctx context.Context, live int64) ([]byte, error) {
			recs, err := a.records(live).ListRecords(ctx, t.AppID, kind)
			if err != nil {
				return nil, err
			}
			dst := append(make([]byte, 0, 256*len(recs)+32), `{"`+wrapper+`":[`...)
			for i, r := range recs {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = r.AppendJSON(dst, t.OrganizationID)
			}
			return append(dst, "]}\n"...), nil
		})
		if err != nil {
			a.serverError(c, "list "+wrapper, err)
			return
		}
		a.send(c, b)
	}
}

// one serves one record by ID: {"<wrapper>": {...}}, or 404 with the
// message the reference client knows.
func (a *API) one(kind content.Kind, wrapper, notFound string) gin.HandlerFunc {
	return func(c *gin.Context) {
		t := target(c)
		id := c.Param("id")
		if !auth.PossibleID(id) {
			// No record can have it; PostgreSQL would refuse the query.
			abort(c, http.StatusNotFound, "", notFound)
			return
		}
		b, err := a.cache.recordBody(c.Request.Context(), t.AppID, wrapper+"/"+id, readsDraft(t), func(ctx context.Context, live int64) ([]byte, int64, error) {
			r, err := a.records(live).Record(ctx, t.AppID, kind, id)
			if err != nil {
				return nil, 0, err
			}
			dst := append(make([]byte, 0, len(r.Doc)+200), `{"`+wrapper+`":`...)
			return append(r.AppendJSON(dst, t.OrganizationID), "}\n"...), r.Revision, nil
		})
		switch {
		case errors.Is(err, content.ErrNotFound):
			abort(c, http.StatusNotFound, "", notFound)
		case err != nil:
			a.serverError(c, fmt.Sprintf("get %s %q", kind, id), err)
		default:
			a.send(c, b)
		}
	}
}

func (a *API) app(c *gin.Context) {
	t := target(c)
	// The app's name and fields are not published: one state for all.
	b, err := a.cache.body(c.Request.Context(), t.AppID, "app", true, func(ctx context.Context, _ int64) ([]byte, error) {
		app, err := a.store.App(ctx, t.AppID)
		if err != nil {
			return nil, err
		}
		return append(content.AppendApp(append(make([]byte, 0, len(app.Doc)+200), `{"app":`...), app), "}\n"...), nil
	})
	switch {
	case errors.Is(err, content.ErrNotFound):
		abort(c, http.StatusNotFound, "", "App not found.")
	case err != nil:
		a.serverError(c, "get app", err)
	default:
		a.send(c, b)
	}
}

// send writes a cached body, or 304 when the client holds it already.
func (a *API) send(c *gin.Context, b *body) {
	h := c.Writer.Header()
	h.Set("ETag", b.etag)
	h.Set("Cache-Control", a.cacheControl)
	// Added, not set: a Vary: Origin already there stays.
	h.Add("Vary", "Authorization, Authorize")
	if etagMatches(c.Request.Header.Get("If-None-Match"), b.etag) {
		c.Status(http.StatusNotModified)
		c.Writer.WriteHeaderNow()
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b.data)))
	c.Status(http.StatusOK)
	_, _ = c.Writer.Write(b.data)
}

// etagMatches implements If-None-Match's weak comparison over a list.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
