package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/graphql"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/lexicon"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/operator/analyticspage"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/operator/statuspage"
	"github.com/assistantcms/cms/pkg/operator/webhookwatch"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	"github.com/assistantcms/cms/pkg/tenancy"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// serve runs the content API until ctx ends. This is where the api
// process is assembled: the content API, the ClickHouse readers of past
// queries and of the rollups, and the operator pages.
func serve(ctx context.Context, args []string, lookupEnv func(string) (string, bool), contentDB, logLevel string, stderr io.Writer) error {
	fs := envflag.New(flag.NewFlagSet("api serve", flag.ContinueOnError), lookupEnv)
	fs.SetOutput(stderr)
	f := defineServeFlags(fs, &logLevel)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	trustedProxies, gqlLimits, err := f.check()
	if err != nil {
		return err
	}
	settings, err := f.service.Start(stderr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := settings.Log
	sources, err := statuspage.ParseSources(*f.status.sources, &http.Client{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	store, err := contentdb.Open(ctx, contentDB)
	if err != nil {
		return err
	}
	defer store.Close()
	ch, err := openClickHouseReaders(f.clickhouse(), f.history.rules(), log)
	if err != nil {
		return err
	}
	defer ch.close()
	apiCfg, err := f.apiConfig(store, ch.history, log)
	if err != nil {
		return err
	}
	reg := httpserve.NewRegistry()
	status := f.status.sampler(reg, sources, log)
	live, err := f.live.build(reg, log)
	if err != nil {
		return err
	}
	deliverer, deliver := f.webhooks.deliverer(store, gqlLimits.WebhookAllow, reg, log)
	analytics := analyticspage.New(ch.analytics, log)
	authors, authorsPages, inboxes := f.authorsAnalytics(analytics, ch, store, apiCfg.Knowledge, log)
	watch := f.webhooks.watcher(store, ch.errors, inboxes, deliverer.Wake, log)
	svc, err := contentapi.NewService(contentapi.ServiceConfig{
		API:              apiCfg,
		GraphQL:          gqlLimits,
		TokenCacheTTL:    *f.tokenTTL,
		AuthFailureRate:  f.authFailures.Rate(),
		AuthFailureBurst: f.authFailures.Burst(),
		TrustedProxies:   trustedProxies,
		RateLimitRPS:     *f.rateRPS,
		RateLimitBurst:   *f.rateBurst,
		ShutdownTimeout:  settings.ShutdownTimeout,
		Registry:         reg,
		Pages: append(append(operatorPages(status, analytics), live.pages...),
			authorsPages...),
		Authorized: append([]contentapi.AuthorizedRoute{live.route}, authors...),
		CORS:       settings.CORS,
		HTTP:       settings.HTTP,
		Retention:  contentapi.Retention{Age: *f.retention, Keep: *f.keepRevisions, Interval: *f.pruneInterval},
		OnChange:   deliverer.Wake,
	}, store, log)
	if err != nil {
		return err
	}
	tasks := []func(context.Context){status.Run, deliver, watch}
	if live.hub != nil {
		// Ends the streams as shutdown begins, so that the drain waits
		// for none of them.
		tasks = append(tasks, live.hub.Run)
	}
	return settings.Serve(ctx, alongside(svc.Serve, tasks...))
}

// serveFlags are the settings of api serve, read once its flag set has
// been parsed.
type serveFlags struct {
	service      *launch.Flags
	tokenTTL     *time.Duration
	rateRPS      *float64
	rateBurst    *int
	authFailures auth.FailureFlags
	trusted      *string
	refresh      *time.Duration
	grace        *time.Duration
	maxAge       *time.Duration
	stateBudget  *int64
	// Content history's retention.
	retention     *time.Duration
	keepRevisions *int
	pruneInterval *time.Duration
	graphql       graphqlFlags
	clickhouse    func() chstore.Config
	history       historyFlags
	llmURL        *string
	llmModel      *string
	llmKey        *string
	wordnet       *string
	ranking       rankingFlags
	gapWordings   *int
	gapVectors    *int
	gapFresh      *time.Duration
	gapBuilds     *int
	status        statusFlags
	live          liveFlags
	webhooks      webhookFlags
}

// defineServeFlags defines every flag of api serve on fs; logLevel is the
// global flag's value, which -log-level of serve may override.
func defineServeFlags(fs *envflag.Set, logLevel *string) *serveFlags {
	f := &serveFlags{}
	f.service = launch.Define(fs, launch.Options{
		AddrEnv: "API_ADDR", Addr: ":8080", AddrHelp: "HTTP listen address",
		ShutdownTimeout: 10 * time.Second, ShutdownHelp: "time allowed to drain requests on SIGTERM",
		LogLevel: logLevel, CORS: true,
		HTTP: httpserve.DefaultLimits(),
	})
	f.tokenTTL = fs.Duration("token-cache-ttl", "TOKEN_CACHE_TTL", 10*time.Second, "how long token lookups are cached (at most 30s)")
	f.rateRPS = fs.Float64("rate-limit-rps", "RATE_LIMIT_RPS", 1000, "requests per second allowed per token (0 disables)")
	f.rateBurst = fs.Int("rate-limit-burst", "RATE_LIMIT_BURST", 2000, "burst of requests allowed per token")
	f.authFailures = auth.DefineFailureFlags(fs)
	f.trusted = fs.String("trusted-proxies", "TRUSTED_PROXIES", clientnet.DefaultTrusted,
		"comma-separated networks (CIDR) or addresses of the proxies in front of the api (the gateway), whose X-Forwarded-For names the client whose failed authentications are counted (empty: none, the connection's peer is the client)")
	f.refresh = fs.Duration("refresh-interval", "CONTENT_REFRESH_INTERVAL", contentapi.DefaultRefreshInterval, "longest time before changes written by other processes show")
	f.grace = fs.Duration("outage-grace", "CONTENT_OUTAGE_GRACE", auth.DefaultOutageGrace, "how long cached answers are served while the content database cannot be reached (negative: not at all)")
	f.maxAge = fs.Duration("cache-max-age", "CACHE_MAX_AGE", contentapi.DefaultCacheMaxAge, "max-age of responses in clients' caches (negative: none)")
	f.stateBudget = fs.Int64("app-state-budget", "APP_STATE_BUDGET_BYTES", contentapi.DefaultAppStateBudget, "bytes of per-app state kept in memory (search indexes, vectors, rendered answers); past it the apps used least recently are evicted and reloaded from the content database on their next request (negative: no bound)")
	f.retention = fs.Duration("content-history-retention", "CONTENT_HISTORY_RETENTION", content.DefaultRetention, "revisions of content and audit entries older than this are pruned, except each record's newest (-content-history-keep)")
	f.keepRevisions = fs.Int("content-history-keep", "CONTENT_HISTORY_KEEP", content.DefaultKeepRevisions, "newest revisions of each record kept however old (at least 1: its current state)")
	f.pruneInterval = fs.Duration("content-history-prune-interval", "CONTENT_HISTORY_PRUNE_INTERVAL", time.Hour, "how often content history is pruned, at start and then on (0: never)")
	f.graphql = defineGraphQLFlags(fs)
	f.clickhouse = chstore.DefineFlags(fs, chstore.History)
	f.history = defineHistoryFlags(fs)
	f.llmURL = fs.String("rag-llm-url", "RAG_LLM_URL", "", "OpenAI-compatible API root (…/v1) that writes RAG answers; empty: extractive answers")
	f.llmModel = fs.String("rag-llm-model", "RAG_LLM_MODEL", "", "model name sent to the RAG generator")
	f.llmKey = fs.Secret("rag-llm-api-key", "RAG_LLM_API_KEY", "", "bearer key for the RAG generator")
	f.wordnet = fs.String("wordnet-dir", "WORDNET_DIR", lexicon.DefaultDir, "WordNet 3.0 database (Debian's wordnet-base) whose related words expand search queries; \"off\" for none")
	f.ranking = defineRankingFlags(fs)
	f.gapWordings = fs.Int("gaps-max-wordings", "GAPS_MAX_WORDINGS", gapinbox.DefaultMaxWordings, "distinct unanswered wordings one gap inbox reads and groups, those asked by most users first: bounds its memory and time")
	f.gapFresh = fs.Duration("gaps-fresh-for", "GAPS_FRESH_FOR", gapinbox.DefaultFreshFor, "how long a gap inbox is answered again before it is built anew")
	f.gapBuilds = fs.Int("gaps-builds-per-minute", "GAPS_BUILDS_PER_MINUTE", gapinbox.DefaultBuildsPerMinute, "gap inboxes built for one app a minute (a burst of as many); past it, 429 with Retry-After")
	f.gapVectors = fs.Int("gaps-vector-cache-entries", "GAPS_VECTOR_CACHE_ENTRIES", defaultGapVectors, "vectors of unanswered wordings kept in memory (2 KiB each), so that an inbox built again embeds only new wordings")
	f.status = defineStatusFlags(fs)
	f.live = defineLiveFlags(fs)
	f.webhooks = defineWebhookFlags(fs)
	return f
}

// check validates the settings that need no service to be running, and
// returns the trusted proxies and GraphQL limits they give.
func (f *serveFlags) check() ([]netip.Prefix, graphql.Limits, error) {
	trustedProxies, err := clientnet.ParseTrusted(*f.trusted)
	if err != nil {
		return nil, graphql.Limits{}, fmt.Errorf("-trusted-proxies (TRUSTED_PROXIES): %w", err)
	}
	if err := f.history.check(); err != nil {
		return nil, graphql.Limits{}, err
	}
	switch {
	case *f.retention <= 0:
		return nil, graphql.Limits{}, fmt.Errorf("-content-history-retention (CONTENT_HISTORY_RETENTION) must be positive, got %v", *f.retention)
	case *f.keepRevisions < 1:
		return nil, graphql.Limits{}, fmt.Errorf("-content-history-keep (CONTENT_HISTORY_KEEP) must be at least 1 (a record's current state), got %d", *f.keepRevisions)
	case *f.pruneInterval < 0:
		return nil, graphql.Limits{}, fmt.Errorf("-content-history-prune-interval (CONTENT_HISTORY_PRUNE_INTERVAL) must not be negative, got %v", *f.pruneInterval)
	}
	if err := f.live.check(); err != nil {
		return nil, graphql.Limits{}, err
	}
	switch {
	case *f.gapWordings < 1:
		return nil, graphql.Limits{}, fmt.Errorf("-gaps-max-wordings (GAPS_MAX_WORDINGS) must be at least 1, got %d", *f.gapWordings)
	case *f.gapFresh <= 0:
		return nil, graphql.Limits{}, fmt.Errorf("-gaps-fresh-for (GAPS_FRESH_FOR) must be positive, got %v", *f.gapFresh)
	case *f.gapBuilds < 1:
		return nil, graphql.Limits{}, fmt.Errorf("-gaps-builds-per-minute (GAPS_BUILDS_PER_MINUTE) must be at least 1, got %d", *f.gapBuilds)
	}
	limits, err := f.graphql.limits()
	if err != nil {
		return nil, graphql.Limits{}, err
	}
	if limits.WebhookAllow, err = f.webhooks.check(); err != nil {
		return nil, graphql.Limits{}, err
	}
	return trustedProxies, limits, nil
}

// apiConfig is the content API's configuration: caching, past queries
// from history, and what search, FAQ and RAG know beyond the content.
func (f *serveFlags) apiConfig(store contentdb.Store, history contentapi.History, log *slog.Logger) (contentapi.Config, error) {
	cfg := contentapi.Config{RefreshInterval: *f.refresh, OutageGrace: *f.grace, CacheMaxAge: *f.maxAge, AppStateBudget: *f.stateBudget,
		History: history, HistoryRefresh: *f.history.refresh}
	switch wn, err := loadWordNet(*f.wordnet); {
	case err != nil:
		return contentapi.Config{}, err
	case wn != nil:
		cfg.Knowledge.Lexicon = wn
		log.Info("search expands queries with WordNet", "dir", *f.wordnet)
	default:
		log.Info("no WordNet: search expands queries only with the apps' own synonyms", "dir", *f.wordnet)
	}
	onCores, err := f.ranking.apply(&cfg.Knowledge, store, log)
	if err != nil {
		return contentapi.Config{}, err
	}
	cfg.EmbedsOnCores = onCores
	if *f.llmURL != "" {
		cfg.Generator = &knowledge.OpenAI{BaseURL: *f.llmURL, Model: *f.llmModel, APIKey: *f.llmKey}
	}
	return cfg, nil
}

// graphqlFlags bound what one GraphQL request may cost.
type graphqlFlags struct {
	body, answer, readerAnswer, budget        *int64
	depth, introDepth, fields, cost, listSize *int
	publishes                                 *int
}

func defineGraphQLFlags(fs *envflag.Set) graphqlFlags {
	return graphqlFlags{
		body:       fs.Int64("graphql-max-body-bytes", "GRAPHQL_MAX_BODY_BYTES", graphql.DefaultMaxBodyBytes, "largest GraphQL request body"),
		depth:      fs.Int("graphql-max-depth", "GRAPHQL_MAX_DEPTH", graphql.DefaultMaxDepth, "deepest nesting of fields in a GraphQL request"),
		introDepth: fs.Int("graphql-max-introspection-depth", "GRAPHQL_MAX_INTROSPECTION_DEPTH", graphql.DefaultMaxIntrospectionDepth, "deepest nesting of introspection fields (under __schema and __type) in a GraphQL request; GraphiQL's own query nests 15 deep"),
		fields:     fs.Int("graphql-max-fields", "GRAPHQL_MAX_FIELDS", graphql.DefaultMaxFields, "most fields one GraphQL request may select, fragments spread"),
		cost:       fs.Int("graphql-max-cost", "GRAPHQL_MAX_COST", graphql.DefaultMaxCost, "most fields one GraphQL answer may hold: estimated before the request runs (lists counted as -graphql-list-size items, introspection exactly) and counted while it is resolved"),
		listSize:   fs.Int("graphql-list-size", "GRAPHQL_LIST_SIZE", graphql.DefaultListSize, "items the GraphQL cost estimate assumes a list of records, or of objects within a record, returns"),
		answer:     fs.Int64("graphql-max-answer-bytes", "GRAPHQL_MAX_ANSWER_BYTES", graphql.DefaultMaxAnswerBytes, "largest GraphQL answer, counted while it is resolved"),
		readerAnswer: fs.Int64("graphql-max-reader-answer-bytes", "GRAPHQL_MAX_READER_ANSWER_BYTES", graphql.DefaultMaxReaderAnswerBytes,
			"largest GraphQL answer for a token without content:write (a runtime's, readable in a web page); at most -graphql-max-answer-bytes"),
		budget: fs.Int64("graphql-answer-budget-bytes", "GRAPHQL_ANSWER_BUDGET_BYTES", graphql.DefaultAnswerBudgetBytes,
			"GraphQL answers being built at once, in bytes, shared fairly: an organization at most half while others build answers, its apps and tokens equal parts of its share"),
		publishes: fs.Int("graphql-publishes-per-minute", "GRAPHQL_PUBLISHES_PER_MINUTE", graphql.DefaultPublishesPerMinute,
			"versions one app may make a minute (publishes, rollbacks, publishing turned on, catalogue writes published), a burst of as many: every version is kept"),
	}
}

// limits checks the limits that must be set and returns them all.
func (f graphqlFlags) limits() (graphql.Limits, error) {
	for _, l := range []struct {
		flag, env string
		v         int64
	}{
		{"graphql-max-introspection-depth", "GRAPHQL_MAX_INTROSPECTION_DEPTH", int64(*f.introDepth)},
		{"graphql-max-cost", "GRAPHQL_MAX_COST", int64(*f.cost)},
		{"graphql-list-size", "GRAPHQL_LIST_SIZE", int64(*f.listSize)},
		{"graphql-max-answer-bytes", "GRAPHQL_MAX_ANSWER_BYTES", *f.answer},
		{"graphql-max-reader-answer-bytes", "GRAPHQL_MAX_READER_ANSWER_BYTES", *f.readerAnswer},
		{"graphql-answer-budget-bytes", "GRAPHQL_ANSWER_BUDGET_BYTES", *f.budget},
		{"graphql-publishes-per-minute", "GRAPHQL_PUBLISHES_PER_MINUTE", int64(*f.publishes)},
	} {
		if l.v < 1 {
			// Zero would not switch the limit off but fall back to the default.
			return graphql.Limits{}, fmt.Errorf("serve: -%s (%s) %d: want 1 or more", l.flag, l.env, l.v)
		}
	}
	return graphql.Limits{MaxBodyBytes: *f.body, MaxDepth: *f.depth, MaxIntrospectionDepth: *f.introDepth, MaxFields: *f.fields,
		MaxCost: *f.cost, ListSize: *f.listSize, MaxAnswerBytes: *f.answer, MaxReaderAnswerBytes: *f.readerAnswer, AnswerBudgetBytes: *f.budget,
		PublishesPerMinute: *f.publishes}, nil
}

// historyFlags decide which past queries are suggested as HISTORICAL.
type historyFlags struct {
	refresh              *time.Duration
	users, sources, days *int
}

func defineHistoryFlags(fs *envflag.Set) historyFlags {
	return historyFlags{
		refresh: fs.Duration("history-refresh", "HISTORY_REFRESH", contentapi.DefaultHistoryRefresh, "how long past queries are kept before being read again"),
		users:   fs.Int("history-min-users", "HISTORY_MIN_USERS", queryhistory.DefaultMinUsers, "distinct user IDs, and as many session IDs, that must have asked a query before it is suggested as HISTORICAL"),
		sources: fs.Int("history-min-sources", "HISTORY_MIN_SOURCES", 0, "distinct sources (access token and client network, as the server saw them) that must have asked a query before it is suggested as HISTORICAL (0: as many as -history-min-users)"),
		days:    fs.Int("history-days", "HISTORY_DAYS", chschema.DefaultHistoryDays, "days of past queries HISTORICAL suggestions count, ending today"),
	}
}

func (f historyFlags) check() error {
	if *f.users < 1 {
		return fmt.Errorf("serve: -history-min-users (HISTORY_MIN_USERS) %d: want 1 or more", *f.users)
	}
	if *f.sources < 0 {
		return fmt.Errorf("serve: -history-min-sources (HISTORY_MIN_SOURCES) %d: want 1 or more (0: as many as users)", *f.sources)
	}
	if *f.days < 1 {
		return fmt.Errorf("serve: -history-days (HISTORY_DAYS) %d: want 1 or more", *f.days)
	}
	return nil
}

func (f historyFlags) rules() queryhistory.Suggestable {
	return queryhistory.Suggestable{MinUsers: *f.users, MinSources: *f.sources, Days: *f.days}
}

// clickHouseReaders are what the api reads from ClickHouse: past queries
// for HISTORICAL suggestions, and the rollups the analytics page draws.
// Without ClickHouse both are nil: no HISTORICAL suggestions, and the
// page answers 503, saying why.
type clickHouseReaders struct {
	history       contentapi.History
	analytics     analyticspage.Source
	gaps          gapinbox.Source
	conversations analyticspage.Conversations
	errors        webhookwatch.ErrorCounter
	close         func()
}

// openClickHouseReaders returns the readers of the database in cfg. They
// connect on first use, so that the api starts and serves while
// ClickHouse is down; bad settings fail the start.
func openClickHouseReaders(cfg chstore.Config, rules queryhistory.Suggestable, log *slog.Logger) (clickHouseReaders, error) {
	if len(cfg.Addrs) == 0 {
		log.Info("no ClickHouse configured: no HISTORICAL suggestions, and " + analyticspage.Path + " answers 503")
		return clickHouseReaders{close: func() {}}, nil
	}
	if err := cfg.Check(); err != nil {
		return clickHouseReaders{}, err
	}
	h := newClickHouseHistory(cfg, rules)
	a := analyticspage.NewClickHouse(cfg)
	return clickHouseReaders{history: h, analytics: a, gaps: a, conversations: a, errors: a.ErrorCounts,
		close: func() { _ = h.Close(); _ = a.Close() }}, nil
}

// defaultGapVectors is the default of -gaps-vector-cache-entries: the
// vectors of two inboxes of DefaultMaxWordings, 20 MiB.
const defaultGapVectors = 2 * gapinbox.DefaultMaxWordings

// authorsAnalytics are the routes of an app's authors on the client
// address, and their page's files, behind a token holding events:read: the app's analytics
// report and its gap inbox. The inbox groups by meaning with the built-in
// encoder when the api ranks with it (vectors of another model would
// need thresholds of their own), else by words.
func (f *serveFlags) authorsAnalytics(analytics *analyticspage.Handler, ch clickHouseReaders, store gapinbox.Content, ranking knowledge.Options, log *slog.Logger) ([]contentapi.AuthorizedRoute, []contentapi.Page, *gapinbox.Builder) {
	var builder *gapinbox.Builder
	if ch.gaps != nil {
		var emb gapinbox.Embedder
		cfg := gapinbox.Config{MaxWordings: *f.gapWordings, FreshFor: *f.gapFresh, BuildsPerMinute: *f.gapBuilds}
		if c, ok := ranking.Embedder.(embeddings.Cached); ok {
			if enc, ok := c.Unwrap().(*encoder.Encoder); ok {
				emb = embeddings.Cached{Cache: embeddings.NewCache(*f.gapVectors), Embedder: enc}
				// The content's vectors, kept in the content database.
				cfg.ContentEmbedder, _ = ranking.ContentEmbedder.(gapinbox.Embedder)
			}
		}
		builder = gapinbox.New(ch.gaps, store, emb, cfg)
	}
	conv := analyticspage.NewConversations(ch.conversations, log)
	page := analyticspage.AuthorsPage()
	routes := []contentapi.AuthorizedRoute{
		{Path: analyticspage.AuthorsPath, Scope: tenancy.EventsRead, Need: "reading the app's analytics", Serve: analytics.AppData,
			Page: page, WantsPage: httpserve.WantsPage},
		{Path: analyticspage.AppDataPath, Scope: tenancy.EventsRead, Need: "reading the app's analytics", Serve: analytics.AppData},
		{Path: gapinbox.Path, Scope: tenancy.EventsRead, Need: "reading the app's gap inbox", Serve: gapinbox.NewHandler(builder, log).Serve},
		{Path: analyticspage.SessionsPath, Scope: tenancy.EventsRead, Need: "reading the app's sessions", Serve: conv.Sessions},
		{Path: analyticspage.ConversationPath, Scope: tenancy.EventsRead, Need: "reading the app's conversations", Serve: conv.Conversation},
		{Path: analyticspage.SamplesPath, Scope: tenancy.EventsRead, Need: "reading the app's conversations", Serve: conv.Samples},
	}
	return routes, []contentapi.Page{{Path: analyticspage.AuthorsScriptPath, Handler: page}, {Path: analyticspage.AuthorsStylePath, Handler: page}}, builder
}

// rankingFlags choose how search, FAQ and RAG rank by meaning: the
// built-in sentence encoder, an embeddings endpoint, or not at all.
type rankingFlags struct {
	encDir, url, model, key *string
	timeout, queryTimeout   *time.Duration
	minSim                  *float64
	cacheEntries            *int
}

func defineRankingFlags(fs *envflag.Set) rankingFlags {
	return rankingFlags{
		encDir:       fs.String("encoder-dir", "ENCODER_DIR", "", "the sentence encoder's model files (deploy/install-encoder installs them), with which search, FAQ matching and RAG rank by meaning as well as by words; empty: "+encoder.DefaultDir+", else cms/encoder in the user's cache directory; \"off\": by words only; -embeddings-url replaces it"),
		url:          fs.String("embeddings-url", "EMBEDDINGS_URL", "", "OpenAI-compatible API root (…/v1) whose /embeddings endpoint replaces the built-in sentence encoder; empty: the encoder"),
		model:        fs.String("embeddings-model", "EMBEDDINGS_MODEL", "", "embedding model name (required with -embeddings-url)"),
		key:          fs.Secret("embeddings-api-key", "EMBEDDINGS_API_KEY", "", "bearer key for the embeddings endpoint"),
		timeout:      fs.Duration("embeddings-timeout", "EMBEDDINGS_TIMEOUT", 30*time.Second, "bound on one request embedding the apps' content"),
		queryTimeout: fs.Duration("embeddings-query-timeout", "EMBEDDINGS_QUERY_TIMEOUT", knowledge.DefaultQueryTimeout, "bound on embedding one question; past it the lexical answer is served"),
		minSim:       fs.Float64("embeddings-min-similarity", "EMBEDDINGS_MIN_SIMILARITY", 0, "least cosine similarity to the question for an item to be ranked by meaning (0: the 50 nearest, however far; what is unrelated depends on the model)"),
		cacheEntries: fs.Int("embeddings-cache-entries", "EMBEDDINGS_CACHE_ENTRIES", embeddings.DefaultCacheEntries, "vectors kept by content hash, so a new revision embeds only what changed"),
	}
}

// embedder is the embeddings endpoint when one is set, else the built-in
// encoder unless it is off; nil ranks by words only.
func (f rankingFlags) embedder(log *slog.Logger) (embeddings.Embedder, error) {
	switch {
	case *f.url != "":
		if *f.model == "" {
			return nil, fmt.Errorf("serve: -embeddings-model (EMBEDDINGS_MODEL) is required with -embeddings-url (EMBEDDINGS_URL)")
		}
		client, err := embeddings.New(embeddings.Config{URL: *f.url, Model: *f.model, APIKey: *f.key, Timeout: *f.timeout}, nil)
		if err != nil {
			return nil, fmt.Errorf("serve: -embeddings-url (EMBEDDINGS_URL): %w", err)
		}
		log.Info("ranking by meaning through an embeddings endpoint", "url", *f.url, "model", *f.model)
		return client, nil
	case *f.encDir != "off":
		dir, searched := *f.encDir, []string{*f.encDir}
		if dir == "" {
			// The machine's installation, else the one a user without
			// root made in their cache directory.
			dir, searched = encoder.Locate()
		}
		start := time.Now()
		enc, err := encoder.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("serve: -encoder-dir (ENCODER_DIR): %w (looked in %s); install the model with deploy/install-encoder DIR into one of them, or set ENCODER_DIR=off to rank by words only",
				err, strings.Join(searched, " and "))
		}
		log.Info("ranking by meaning with the built-in sentence encoder", "dir", dir, "model", enc.Model(), "loaded_in", time.Since(start).Round(time.Millisecond))
		return enc, nil
	}
	log.Info("ranking by words only (ENCODER_DIR=off)")
	return nil, nil
}

// apply sets how opts rank by meaning, leaving them ranking by words
// only when there is no embedder; onCores says the built-in encoder, not
// an endpoint, embeds the questions.
func (f rankingFlags) apply(opts *knowledge.Options, store embeddings.VectorStore, log *slog.Logger) (onCores bool, err error) {
	emb, err := f.embedder(log)
	if err != nil || emb == nil {
		return false, err
	}
	if *f.minSim < -1 || *f.minSim > 1 {
		return false, fmt.Errorf("serve: -embeddings-min-similarity (EMBEDDINGS_MIN_SIMILARITY) %v: want -1 to 1", *f.minSim)
	}
	// Questions through the cache in memory; the content through the
	// content database, so a restart or a replica embeds only what no
	// one has.
	opts.Embedder = embeddings.Cached{Cache: embeddings.NewCache(*f.cacheEntries), Embedder: emb}
	opts.ContentEmbedder = embeddings.NewStored(store, emb, log)
	opts.QueryTimeout = *f.queryTimeout
	opts.MinSimilarity = *f.minSim
	_, onCores = emb.(*encoder.Encoder)
	return onCores, nil
}

// statusFlags are what the status page charts and how often it reads
// them.
type statusFlags struct {
	sources  *string
	interval *time.Duration
}

func defineStatusFlags(fs *envflag.Set) statusFlags {
	return statusFlags{
		sources:  fs.String("status-sources", "STATUS_SOURCES", "", "other services charted on /status, as name=metrics-URL,... (the api's own metrics are always there)"),
		interval: fs.Duration("status-interval", "STATUS_INTERVAL", statuspage.DefaultInterval, "how often /status reads its sources"),
	}
}

// sampler reads the api's own metrics in reg and the other services'
// sources for the status page.
func (f statusFlags) sampler(reg *prometheus.Registry, sources []statuspage.Source, log *slog.Logger) *statuspage.Sampler {
	interval := *f.interval
	if interval <= 0 {
		interval = statuspage.DefaultInterval
	}
	// Five minutes of history, so the charts have data as the page opens.
	return statuspage.NewSampler(append([]statuspage.Source{statuspage.Local("api", reg)}, sources...),
		interval, int(5*time.Minute/interval)+1, log)
}

// operatorPages are the status and analytics pages, which the api serves
// beside the content routes, on its operator address.
func operatorPages(status *statuspage.Sampler, analytics *analyticspage.Handler) []contentapi.Page {
	return []contentapi.Page{
		{Path: statuspage.Path, Handler: statuspage.PageHandler()},
		{Path: statuspage.DataPath, Handler: status.DataHandler()},
		{Path: analyticspage.Path, Handler: analytics.PageHandler()},
		{Path: analyticspage.DataPath, Handler: analytics.DataHandler()},
	}
}

// alongside serves with serve while tasks run in the background; their
// context ends, and they return, before the serving function does, so
// that the status page's last scrape is over once the api has stopped.
func alongside(serve func(context.Context, net.Listener) error, tasks ...func(context.Context)) func(context.Context, net.Listener) error {
	return func(ctx context.Context, ln net.Listener) error {
		tctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, task := range tasks {
			wg.Go(func() { task(tctx) })
		}
		defer func() { stop(); wg.Wait() }()
		return serve(ctx, ln)
	}
}

// loadWordNet reads the WordNet database in dir. The default directory
// may be missing (the lexicon is an addition, and Debian installs it
// apart): that gives nil. A directory set by hand must be there.
func loadWordNet(dir string) (*lexicon.WordNet, error) {
	if dir == "off" || dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && dir == lexicon.DefaultDir {
		return nil, nil
	}
	wn, err := lexicon.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("serve: -wordnet-dir (WORDNET_DIR): %w", err)
	}
	return wn, nil
}
