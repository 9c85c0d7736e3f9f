package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/graphql"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/lexicon"
	"github.com/assistantcms/cms/pkg/edge/analyticspage"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/edge/statuspage"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// serve runs the content API until ctx ends.
func serve(ctx context.Context, args []string, lookupEnv func(string) (string, bool), contentDB, logLevel string, stderr io.Writer) error {
	fs := envflag.New(flag.NewFlagSet("api serve", flag.ContinueOnError), lookupEnv)
	fs.SetOutput(stderr)
	svcFlags := launch.Define(fs, launch.Options{
		AddrEnv: "API_ADDR", Addr: ":8080", AddrHelp: "HTTP listen address",
		ShutdownTimeout: 10 * time.Second, ShutdownHelp: "time allowed to drain requests on SIGTERM",
		LogLevel: &logLevel, CORS: true,
		HTTP: httpserve.DefaultLimits(),
	})
	tokenTTL := fs.Duration("token-cache-ttl", "TOKEN_CACHE_TTL", 10*time.Second, "how long token lookups are cached (at most 30s)")
	rateRPS := fs.Float64("rate-limit-rps", "RATE_LIMIT_RPS", 1000, "requests per second allowed per token (0 disables)")
	rateBurst := fs.Int("rate-limit-burst", "RATE_LIMIT_BURST", 2000, "burst of requests allowed per token")
	authFailures := auth.DefineFailureFlags(fs)
	trusted := fs.String("trusted-proxies", "TRUSTED_PROXIES", clientnet.DefaultTrusted,
		"comma-separated networks (CIDR) or addresses of the proxies in front of the api (the gateway), whose X-Forwarded-For names the client whose failed authentications are counted (empty: none, the connection's peer is the client)")
	refresh := fs.Duration("refresh-interval", "CONTENT_REFRESH_INTERVAL", contentapi.DefaultRefreshInterval, "longest time before changes written by other processes show")
	grace := fs.Duration("outage-grace", "CONTENT_OUTAGE_GRACE", contentapi.DefaultOutageGrace, "how long cached answers are served while the content database cannot be reached (negative: not at all)")
	maxAge := fs.Duration("cache-max-age", "CACHE_MAX_AGE", contentapi.DefaultCacheMaxAge, "max-age of responses in clients' caches (negative: none)")
	gqlBody := fs.Int64("graphql-max-body-bytes", "GRAPHQL_MAX_BODY_BYTES", graphql.DefaultMaxBodyBytes, "largest GraphQL request body")
	gqlDepth := fs.Int("graphql-max-depth", "GRAPHQL_MAX_DEPTH", graphql.DefaultMaxDepth, "deepest nesting of fields in a GraphQL request")
	gqlIntroDepth := fs.Int("graphql-max-introspection-depth", "GRAPHQL_MAX_INTROSPECTION_DEPTH", graphql.DefaultMaxIntrospectionDepth, "deepest nesting of introspection fields (under __schema and __type) in a GraphQL request; GraphiQL's own query nests 15 deep")
	gqlFields := fs.Int("graphql-max-fields", "GRAPHQL_MAX_FIELDS", graphql.DefaultMaxFields, "most fields one GraphQL request may select, fragments spread")
	gqlCost := fs.Int("graphql-max-cost", "GRAPHQL_MAX_COST", graphql.DefaultMaxCost, "most fields one GraphQL answer may hold: estimated before the request runs (lists counted as -graphql-list-size items, introspection exactly) and counted while it is resolved")
	gqlListSize := fs.Int("graphql-list-size", "GRAPHQL_LIST_SIZE", graphql.DefaultListSize, "items the GraphQL cost estimate assumes a list of records, or of objects within a record, returns")
	gqlAnswer := fs.Int64("graphql-max-answer-bytes", "GRAPHQL_MAX_ANSWER_BYTES", graphql.DefaultMaxAnswerBytes, "largest GraphQL answer, counted while it is resolved")
	clickhouse := chstore.DefineFlags(fs, chstore.History)
	historyRefresh := fs.Duration("history-refresh", "HISTORY_REFRESH", contentapi.DefaultHistoryRefresh, "how long past queries are kept before being read again")
	historyUsers := fs.Int("history-min-users", "HISTORY_MIN_USERS", queryhistory.DefaultMinUsers, "distinct user IDs, and as many session IDs, that must have asked a query before it is suggested as HISTORICAL")
	historySources := fs.Int("history-min-sources", "HISTORY_MIN_SOURCES", 0, "distinct sources (access token and client network, as the server saw them) that must have asked a query before it is suggested as HISTORICAL (0: as many as -history-min-users)")
	historyDays := fs.Int("history-days", "HISTORY_DAYS", chschema.DefaultHistoryDays, "days of past queries HISTORICAL suggestions count, ending today")
	llmURL := fs.String("rag-llm-url", "RAG_LLM_URL", "", "OpenAI-compatible API root (…/v1) that writes RAG answers; empty: extractive answers")
	llmModel := fs.String("rag-llm-model", "RAG_LLM_MODEL", "", "model name sent to the RAG generator")
	llmKey := fs.Secret("rag-llm-api-key", "RAG_LLM_API_KEY", "", "bearer key for the RAG generator")
	wordnet := fs.String("wordnet-dir", "WORDNET_DIR", lexicon.DefaultDir, "WordNet 3.0 database (Debian's wordnet-base) whose related words expand search queries; \"off\" for none")
	encDir := fs.String("encoder-dir", "ENCODER_DIR", encoder.DefaultDir, "the sentence encoder's model files (deploy/install-encoder installs them), with which search, FAQ matching and RAG rank by meaning as well as by words; \"off\": by words only; -embeddings-url replaces it")
	embURL := fs.String("embeddings-url", "EMBEDDINGS_URL", "", "OpenAI-compatible API root (…/v1) whose /embeddings endpoint replaces the built-in sentence encoder; empty: the encoder")
	embModel := fs.String("embeddings-model", "EMBEDDINGS_MODEL", "", "embedding model name (required with -embeddings-url)")
	embKey := fs.Secret("embeddings-api-key", "EMBEDDINGS_API_KEY", "", "bearer key for the embeddings endpoint")
	embTimeout := fs.Duration("embeddings-timeout", "EMBEDDINGS_TIMEOUT", 30*time.Second, "bound on one request embedding the apps' content")
	embQueryTimeout := fs.Duration("embeddings-query-timeout", "EMBEDDINGS_QUERY_TIMEOUT", knowledge.DefaultQueryTimeout, "bound on embedding one question; past it the lexical answer is served")
	embMinSim := fs.Float64("embeddings-min-similarity", "EMBEDDINGS_MIN_SIMILARITY", 0, "least cosine similarity to the question for an item to be ranked by meaning (0: the 50 nearest, however far; what is unrelated depends on the model)")
	embCache := fs.Int("embeddings-cache-entries", "EMBEDDINGS_CACHE_ENTRIES", embeddings.DefaultCacheEntries, "vectors kept by content hash, so a new revision embeds only what changed")
	statusSources := fs.String("status-sources", "STATUS_SOURCES", "", "other services charted on /status, as name=metrics-URL,... (the api's own metrics are always there)")
	statusInterval := fs.Duration("status-interval", "STATUS_INTERVAL", contentapi.DefaultStatusInterval, "how often /status reads its sources")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	trustedProxies, err := clientnet.ParseTrusted(*trusted)
	if err != nil {
		return fmt.Errorf("-trusted-proxies (TRUSTED_PROXIES): %w", err)
	}
	if *historyUsers < 1 {
		return fmt.Errorf("serve: -history-min-users (HISTORY_MIN_USERS) %d: want 1 or more", *historyUsers)
	}
	if *historySources < 0 {
		return fmt.Errorf("serve: -history-min-sources (HISTORY_MIN_SOURCES) %d: want 1 or more (0: as many as users)", *historySources)
	}
	if *historyDays < 1 {
		return fmt.Errorf("serve: -history-days (HISTORY_DAYS) %d: want 1 or more", *historyDays)
	}
	for _, l := range []struct {
		flag, env string
		v         int64
	}{
		{"graphql-max-introspection-depth", "GRAPHQL_MAX_INTROSPECTION_DEPTH", int64(*gqlIntroDepth)},
		{"graphql-max-cost", "GRAPHQL_MAX_COST", int64(*gqlCost)},
		{"graphql-list-size", "GRAPHQL_LIST_SIZE", int64(*gqlListSize)},
		{"graphql-max-answer-bytes", "GRAPHQL_MAX_ANSWER_BYTES", *gqlAnswer},
	} {
		if l.v < 1 {
			// Zero would not switch the limit off but fall back to the default.
			return fmt.Errorf("serve: -%s (%s) %d: want 1 or more", l.flag, l.env, l.v)
		}
	}
	settings, err := svcFlags.Start(stderr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := settings.Log
	sources, err := statuspage.ParseSources(*statusSources, &http.Client{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	store, err := contentdb.Open(ctx, contentDB)
	if err != nil {
		return err
	}
	defer store.Close()
	apiCfg := contentapi.Config{RefreshInterval: *refresh, OutageGrace: *grace, CacheMaxAge: *maxAge, HistoryRefresh: *historyRefresh}
	var analytics analyticspage.Source
	if chCfg := clickhouse(); len(chCfg.Addrs) > 0 {
		// History and the analytics page connect on first use; bad
		// settings fail the start.
		if err := chCfg.Check(); err != nil {
			return err
		}
		h := contentapi.NewClickHouseHistory(chCfg, queryhistory.Suggestable{MinUsers: *historyUsers, MinSources: *historySources, Days: *historyDays})
		defer h.Close()
		apiCfg.History = h
		a := analyticspage.NewClickHouse(chCfg)
		defer a.Close()
		analytics = a
	} else {
		log.Info("no ClickHouse configured: no HISTORICAL suggestions, and " + analyticspage.Path + " answers 503")
	}
	switch wn, err := loadWordNet(*wordnet); {
	case err != nil:
		return err
	case wn != nil:
		apiCfg.Knowledge.Lexicon = wn
		log.Info("search expands queries with WordNet", "dir", *wordnet)
	default:
		log.Info("no WordNet: search expands queries only with the apps' own synonyms", "dir", *wordnet)
	}
	var emb embeddings.Embedder
	if *embURL != "" {
		if *embModel == "" {
			return fmt.Errorf("serve: -embeddings-model (EMBEDDINGS_MODEL) is required with -embeddings-url (EMBEDDINGS_URL)")
		}
		client, err := embeddings.New(embeddings.Config{URL: *embURL, Model: *embModel, APIKey: *embKey, Timeout: *embTimeout}, nil)
		if err != nil {
			return fmt.Errorf("serve: -embeddings-url (EMBEDDINGS_URL): %w", err)
		}
		emb = client
		log.Info("ranking by meaning through an embeddings endpoint", "url", *embURL, "model", *embModel)
	} else if *encDir != "off" {
		start := time.Now()
		enc, err := encoder.Load(*encDir)
		if err != nil {
			return fmt.Errorf("serve: -encoder-dir (ENCODER_DIR): %w; install the model with deploy/install-encoder %s, or set ENCODER_DIR=off to rank by words only", err, *encDir)
		}
		emb = enc
		log.Info("ranking by meaning with the built-in sentence encoder", "dir", *encDir, "model", enc.Model(), "loaded_in", time.Since(start).Round(time.Millisecond))
	} else {
		log.Info("ranking by words only (ENCODER_DIR=off)")
	}
	if emb != nil {
		if *embMinSim < -1 || *embMinSim > 1 {
			return fmt.Errorf("serve: -embeddings-min-similarity (EMBEDDINGS_MIN_SIMILARITY) %v: want -1 to 1", *embMinSim)
		}
		// Questions through the cache in memory; the content through the
		// content database, so a restart or a replica embeds only what no
		// one has.
		apiCfg.Knowledge.Embedder = embeddings.Cached{Cache: embeddings.NewCache(*embCache), Embedder: emb}
		apiCfg.Knowledge.ContentEmbedder = embeddings.NewStored(store, emb, log)
		apiCfg.Knowledge.QueryTimeout = *embQueryTimeout
		apiCfg.Knowledge.MinSimilarity = *embMinSim
	}
	if *llmURL != "" {
		apiCfg.Generator = &knowledge.OpenAI{BaseURL: *llmURL, Model: *llmModel, APIKey: *llmKey}
	}
	gqlLimits := graphql.Limits{MaxBodyBytes: *gqlBody, MaxDepth: *gqlDepth, MaxIntrospectionDepth: *gqlIntroDepth, MaxFields: *gqlFields,
		MaxCost: *gqlCost, ListSize: *gqlListSize, MaxAnswerBytes: *gqlAnswer}
	svc, err := contentapi.NewService(contentapi.ServiceConfig{
		API:              apiCfg,
		GraphQL:          gqlLimits,
		TokenCacheTTL:    *tokenTTL,
		AuthFailureRate:  authFailures.Rate(),
		AuthFailureBurst: authFailures.Burst(),
		TrustedProxies:   trustedProxies,
		RateLimitRPS:     *rateRPS,
		RateLimitBurst:   *rateBurst,
		ShutdownTimeout:  settings.ShutdownTimeout,
		StatusSources:    sources,
		StatusInterval:   *statusInterval,
		Analytics:        analytics,
		CORS:             settings.CORS,
		HTTP:             settings.HTTP,
	}, store, log)
	if err != nil {
		return err
	}
	return settings.Serve(ctx, svc.Serve)
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
