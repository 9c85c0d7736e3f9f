package contentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/content/search"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// History reads how often past queries were asked on an app's channel,
// most asked first.
type History interface {
	TopQueries(ctx context.Context, appID, channel string, limit int) ([]knowledge.QueryCount, error)
}

// Limits of the knowledge endpoints.
const (
	// maxQuestionRunes is how much of a question or typed text is
	// searched; the rest is left out (see shorten).
	maxQuestionRunes      = 1000
	defaultSuggestions    = 5
	maxSuggestions        = 50
	defaultFAQs           = 10
	maxFAQs               = 100
	historyQueries        = 5000
	DefaultHistoryRefresh = 30 * time.Second
	// historyRetry is how long a failed read of past queries is not
	// tried again, so that an unreachable ClickHouse costs little.
	historyRetry = 5 * time.Second
	// maxPooledBuffer bounds the answer buffers kept for reuse.
	maxPooledBuffer = 1 << 20
	jsonContentType = "application/json; charset=utf-8"
	// OmittedHeader names suggestion types left out of an answer.
	OmittedHeader = "X-Suggestions-Omitted"
)

// base returns the app's knowledge base at its current revision, built
// once per revision: of its draft, or of its live version.
func (a *API) base(ctx context.Context, org, appID string, draft bool) (*knowledge.Base, error) {
	v, err := a.cache.getOrStale(ctx, appID, "knowledge", draft, func(ctx context.Context, live int64) (any, error) {
		var src knowledge.Content
		for _, k := range []struct {
			kind content.Kind
			to   *[]content.Record
		}{{content.KindDocument, &src.Documents}, {content.KindFAQ, &src.FAQs}, {content.KindIntent, &src.Intents}, {content.KindEntity, &src.Entities}} {
			recs, err := a.records(live).ListRecords(ctx, appID, k.kind)
			if err != nil {
				return nil, err
			}
			*k.to = recs
		}
		o := a.cfg.Knowledge
		o.App = appID
		if o.Log == nil {
			o.Log = a.log.With("app_id", appID)
		}
		// The build is work for one core, and so is its work in the
		// background (cutting the content into passages, reading its
		// stored vectors, or encoding it when questions are encoded here
		// too): they take turns at the build gate, across organizations
		// and apps, and leave a core to the rankings. A build beside
		// the rankings yields its core often (see search.BuildWith); one
		// holding a ranking place for tens of milliseconds made every
		// question of the other apps queue at the remaining place.
		tenant := rankTenant{org: org, app: appID}
		o.Turn = func(ctx context.Context, work func()) error {
			if err := a.building.enter(ctx, tenant); err != nil {
				return err
			}
			defer a.building.leave(tenant)
			work()
			return nil
		}
		o.EmbedInTurns = a.cfg.EmbedsOnCores
		// Who changed the content pays for the index, or else the
		// request that needed it. The change is read before the build and
		// cleared after it only if no newer one came meanwhile: a change
		// made while it runs is owed by the next build. A build started in
		// the background may begin after a newer change: then it and the
		// build that change needs are both charged to it, never to a
		// reader.
		owed, ok := a.owed.Load(appID)
		var b *knowledge.Base
		var err error
		var took time.Duration
		if terr := o.Turn(ctx, func() {
			start := time.Now()
			b, err = knowledge.New(src, o)
			took = time.Since(start)
		}); terr != nil {
			return nil, terr
		}
		if err != nil {
			return nil, err // still owed
		}
		if ok {
			a.limiter.Charge(owed.(*change).token, float64(took)/float64(WorkPerRequest))
			a.owed.CompareAndDelete(appID, owed)
		} else {
			charge(ctx, took, WorkPerRequest)
		}
		// The previous revision's base answers meanwhile (with its vectors),
		// and most texts of a new revision are cached already: waiting a
		// little here spares answers ranked lexically in between. A build
		// that takes longer goes on in the background.
		wait, cancel := context.WithTimeout(ctx, semanticWait)
		defer cancel()
		_ = b.WaitSemantic(wait) // a failure is the base's to report, per question
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*knowledge.Base), nil
}

// text reads an optional text parameter; on failure it has answered.
// Clients send UTF-8 (URLSearchParams does); other bytes or a NUL are a
// mistake better told than answered with nothing found.
func text(c *gin.Context, name string) (string, bool) {
	v := c.Query(name)
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		abort(c, http.StatusBadRequest, name, name+" must be UTF-8 text without NUL characters.")
		return "", false
	}
	return v, true
}

// question reads the required question parameter; on failure it has
// answered. A question over maxQuestionRunes is searched on its start
// (see shorten).
func question(c *gin.Context, name string) (string, bool) {
	q, ok := text(c, name)
	if !ok {
		return "", false
	}
	if q = strings.TrimSpace(q); q == "" {
		abort(c, http.StatusBadRequest, name, name+" is required.")
		return "", false
	}
	return shorten(q), true
}

// shorten cuts a text over maxQuestionRunes to its start, at the last
// word boundary before the limit when there is one near it. Runtimes pass
// on whatever the user typed or pasted, and the reference client treats
// any refusal as a failure with nothing to show, while the start of a
// long text still says what it is about; the limit keeps the cost of a
// search bounded.
func shorten(text string) string {
	short, _ := knowledge.Cut(text, maxQuestionRunes)
	return short
}

// intParam reads an optional integer parameter within [1, max].
func intParam(c *gin.Context, name string, def, max int) (int, bool) {
	v := c.Query(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		abort(c, http.StatusBadRequest, name, fmt.Sprintf("%s must be a whole number from 1 to %d.", name, max))
		return 0, false
	}
	return n, true
}

// asked reads the question and the app's knowledge base; on failure it
// has answered.
func (a *API) asked(c *gin.Context) (string, *knowledge.Base, bool) {
	q, ok := question(c, "question")
	if !ok {
		return "", nil, false
	}
	t := target(c)
	b, err := a.base(c.Request.Context(), t.OrganizationID, t.AppID, readsDraft(t))
	if err != nil {
		a.serverError(c, "build the knowledge base", err)
		return "", nil, false
	}
	return q, b, true
}

func (a *API) search(c *gin.Context) {
	location, ok := text(c, "locationId")
	if !ok {
		return
	}
	q, b, ok := a.asked(c)
	if !ok {
		return
	}
	buf, _ := a.buffers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	if !a.rankQuestion(c, b, q, func(query knowledge.Query) {
		*buf = b.SearchQuery(query, location).AppendJSON((*buf)[:0])
	}) {
		return
	}
	c.Data(http.StatusOK, jsonContentType, *buf)
	if cap(*buf) <= maxPooledBuffer {
		a.buffers.Put(buf)
	}
}

func (a *API) faq(c *gin.Context) {
	size, ok := intParam(c, "size", defaultFAQs, maxFAQs)
	if !ok {
		return
	}
	q, b, ok := a.asked(c)
	if !ok {
		return
	}
	var body []byte
	var err error
	if !a.rankQuestion(c, b, q, func(query knowledge.Query) {
		// Encoded before the query is released: the result may refer to
		// its arrays.
		body, err = json.Marshal(b.FAQsQuery(query, size))
	}) {
		return
	}
	if err != nil {
		a.serverError(c, "encode the FAQ answer", err)
		return
	}
	c.Data(http.StatusOK, jsonContentType, body)
}

// RetrievalHeader says how search and FAQ answers were ranked when
// semantic retrieval is configured: "hybrid" (lexical and vector ranks
// fused) or "lexical-fallback" (the embeddings endpoint failed, or the
// app's content is still being embedded).
const RetrievalHeader = "X-Retrieval"

// understand embeds the question when semantic retrieval is configured,
// and says in a header how the answer is ranked.
func (a *API) understand(c *gin.Context, b *knowledge.Base, q string) knowledge.Query {
	query := b.Understand(c.Request.Context(), q)
	if !b.Semantic() || c.Request.Context().Err() != nil {
		return query // a client gone is no failure of the endpoint
	}
	mode := "hybrid"
	if query.Fallback != nil {
		mode = "lexical-fallback"
		now := time.Now().UnixNano()
		if last := a.retrievalLogged.Load(); !errors.Is(query.Fallback, knowledge.ErrIndexing) && now-last >= int64(retrievalLogEvery) && a.retrievalLogged.CompareAndSwap(last, now) {
			a.log.Warn("semantic retrieval failed; answering lexically", "err", query.Fallback, "app_id", target(c).AppID, "request_id", c.GetString(requestIDKey))
		}
	}
	c.Header(RetrievalHeader, mode)
	if a.retrieval != nil {
		a.retrieval.WithLabelValues(strings.ReplaceAll(mode, "-", "_")).Inc()
	}
	return query
}

// ranked runs work, which must need the CPU alone (no network call), with
// a place at the ranking gate (see rankGate), and charges the CPU time it
// used to the request's token (RankPerRequest). False when the request ended while it
// waited (answered 503): then work did not run.
func (a *API) ranked(c *gin.Context, work func()) bool {
	t := target(c)
	tenant := rankTenant{org: t.OrganizationID, app: t.AppID}
	ctx := c.Request.Context()
	if err := a.ranking.enter(ctx, tenant); err != nil {
		abort(c, http.StatusServiceUnavailable, "", "The request ended while it waited to be answered.")
		return false
	}
	// Given back before the answer is written (ranked returns first): a
	// slow reader holds no place.
	defer a.ranking.leave(tenant)
	charge(ctx, cpuTime(work), RankPerRequest)
	return true
}

// rankQuestion understands q and ranks it with work at the ranking gate.
// A question embedded on this process's cores (the built-in encoder,
// work on the CPU as its ranking is) is embedded with the place held, so that
// it takes its turn too; one sent to an embeddings endpoint is embedded
// before, so that no place waits on the network.
func (a *API) rankQuestion(c *gin.Context, b *knowledge.Base, q string, work func(knowledge.Query)) bool {
	if !a.onCores(b) {
		query := a.understand(c, b, q)
		defer query.Release()
		return a.ranked(c, func() { work(query) })
	}
	return a.ranked(c, func() {
		query := a.understand(c, b, q)
		defer query.Release()
		work(query)
	})
}

// onCores reports whether understanding a question of b needs this
// process's CPU alone.
func (a *API) onCores(b *knowledge.Base) bool { return !b.Semantic() || a.cfg.EmbedsOnCores }

// Timing of semantic retrieval in the API.
const (
	// retrievalLogEvery is how often a failing semantic retrieval is
	// logged.
	retrievalLogEvery = 10 * time.Second
	// semanticWait is how long a new base waits for its vectors before it
	// answers.
	semanticWait = 10 * time.Second
)

// temperature reads the parameter leniently: the reference client may
// send "undefined"; anything that is not a number in [0, 2] means the
// default.
func temperature(v string) float64 {
	t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || t < 0 || t > 2 || t != t {
		return 0.5
	}
	return t
}

func (a *API) rag(c *gin.Context) {
	location, ok := text(c, "locationId")
	if !ok {
		return
	}
	q, b, ok := a.asked(c)
	if !ok {
		return
	}
	// useRetrievalApi ("retrieve" or "query") chooses between two
	// retrieval services in the reference client; here both retrieve the
	// same way, so it is accepted and not needed.
	var ans knowledge.Answer
	var genErr error
	answer := func() {
		ans, genErr = b.Answer(c.Request.Context(), q, location, a.cfg.Generator, temperature(c.Query("temperature")))
	}
	if a.cfg.Generator == nil && a.onCores(b) {
		// All of it on this process's cores: it takes its turn as a
		// search does. An answer that waits on an endpoint (embeddings or
		// a generator) takes no place.
		if !a.ranked(c, answer) {
			return
		}
	} else {
		answer()
	}
	if genErr != nil {
		a.log.Warn("answer generator failed; answered extractively", "err", genErr, "request_id", c.GetString(requestIDKey))
		c.Header("X-Answer-Generator", "fallback")
	}
	c.JSON(http.StatusOK, ans)
}

// suggestionKinds parses the type parameter.
func suggestionKinds(v string) (map[string]bool, error) {
	kinds := map[string]bool{}
	if strings.TrimSpace(v) == "" {
		for _, k := range knowledge.SuggestionKinds() {
			kinds[k] = true
		}
		return kinds, nil
	}
	for _, part := range strings.Split(v, ",") {
		k := strings.ToUpper(strings.TrimSpace(part))
		switch k {
		case knowledge.KindIntent, knowledge.KindFAQ, knowledge.KindHistorical:
			kinds[k] = true
		case "":
		default:
			return nil, fmt.Errorf("type %q is not a suggestion type; use INTENT, FAQ or HISTORICAL, comma-separated", strings.TrimSpace(part))
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("type names no suggestion type; use INTENT, FAQ or HISTORICAL, comma-separated")
	}
	return kinds, nil
}

func (a *API) suggestions(c *gin.Context) {
	p, ok := a.principal(c)
	if !ok {
		return
	}
	appID, hasAppID := c.GetQuery("appId")
	if hasAppID && strings.TrimSpace(appID) == "" {
		abort(c, http.StatusBadRequest, "appId", "appId must not be empty.")
		return
	}
	key, ok := text(c, "key")
	if !ok {
		return
	}
	if key = strings.TrimSpace(key); key == "" {
		abort(c, http.StatusBadRequest, "key", "key is required.")
		return
	}
	typed, ok := text(c, "queryText")
	if !ok {
		return
	}
	if strings.TrimSpace(typed) == "" {
		abort(c, http.StatusBadRequest, "queryText", "queryText is required.")
		return
	}
	typed = shorten(typed)
	types, ok := text(c, "type")
	if !ok {
		return
	}
	kinds, err := suggestionKinds(types)
	if err != nil {
		abort(c, http.StatusBadRequest, "type", err.Error()+".")
		return
	}
	size, ok := intParam(c, "size", defaultSuggestions, maxSuggestions)
	if !ok {
		return
	}
	app, channel, err := a.keys.lookup(c.Request.Context(), key)
	// A key of an app the token cannot reach is answered as an unknown one
	// is, so that keys cannot be told to exist by trying them.
	if err == nil && (p.AppID != "" && p.AppID != app.ID || p.OrganizationID != app.OrganizationID) {
		err = content.ErrNotFound
	}
	switch {
	case err != nil && isNotFound(err):
		abort(c, http.StatusNotFound, "key", "No channel of this token's apps has this key.")
		return
	case err != nil:
		a.serverError(c, "look up the channel key", err)
		return
	}
	// The key names the app; an appId naming another is a contradiction
	// refused as on the other routes, not silently ignored.
	if hasAppID && appID != app.ID {
		abort(c, http.StatusForbidden, "appId", "appId names another app than the channel key's.")
		return
	}
	if !a.resolve(c, p, app.ID) {
		return
	}
	b, err := a.base(c.Request.Context(), app.OrganizationID, app.ID, readsDraft(target(c)))
	if err != nil {
		a.serverError(c, "build the knowledge base", err)
		return
	}
	var history *search.Suggester
	if kinds[knowledge.KindHistorical] {
		if history = a.history.get(c.Request.Context(), app.ID, channel); history == nil {
			c.Header(OmittedHeader, knowledge.KindHistorical)
		}
	}
	var found []knowledge.Suggestion
	if !a.ranked(c, func() { found = b.Suggest(typed, kinds, history, size) }) {
		return
	}
	c.JSON(http.StatusOK, struct {
		Suggestions []knowledge.Suggestion `json:"suggestions"`
	}{found})
}

// historyCache keeps each channel's past queries for a while, so that
// suggestions need no ClickHouse round trip per keystroke.
type historyCache struct {
	src     History
	refresh time.Duration
	mu      sync.Mutex
	entries map[string]*historyEntry
}

type historyEntry struct {
	mu       sync.Mutex
	at       time.Time
	failedAt time.Time
	sugg     *search.Suggester
}

func newHistoryCache(src History, refresh time.Duration) *historyCache {
	if refresh <= 0 {
		refresh = DefaultHistoryRefresh
	}
	return &historyCache{src: src, refresh: refresh, entries: map[string]*historyEntry{}}
}

// forget drops the past queries of the apps' channels.
func (h *historyCache) forget(apps []string) {
	gone := make(map[string]bool, len(apps))
	for _, app := range apps {
		gone[app] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.entries {
		if app, _, _ := strings.Cut(k, "\x00"); gone[app] {
			delete(h.entries, k)
		}
	}
}

// get returns the channel's past queries, or nil when they cannot be read
// now: no history store, or it failed on the last try.
func (h *historyCache) get(ctx context.Context, appID, channel string) *search.Suggester {
	if h.src == nil {
		return nil
	}
	h.mu.Lock()
	e, ok := h.entries[appID+"\x00"+channel]
	if !ok {
		e = &historyEntry{}
		h.entries[appID+"\x00"+channel] = e
	}
	h.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if e.sugg != nil && now.Sub(e.at) < h.refresh {
		return e.sugg
	}
	if !e.failedAt.IsZero() && now.Sub(e.failedAt) < historyRetry {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	qs, err := h.src.TopQueries(ctx, appID, channel, historyQueries)
	if err != nil {
		// Stale counts are not served: the answer says HISTORICAL is
		// missing instead.
		e.failedAt, e.sugg = now, nil
		return nil
	}
	e.at, e.failedAt, e.sugg = now, time.Time{}, knowledge.History(qs)
	return e.sugg
}

func isNotFound(err error) bool { return errors.Is(err, content.ErrNotFound) }

// keyCache remembers channel keys for a refresh interval, as the other
// caches do, so that a keystroke costs no database query.
type keyCache struct {
	store interface {
		AppByChannelKey(ctx context.Context, key string) (tenancy.App, string, error)
	}
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]keyEntry
}

type keyEntry struct {
	app     tenancy.App
	channel string
	err     error // ErrNotFound is cached too; other errors are not
	at      time.Time
}

// maxKeys bounds the cache, which unknown keys could otherwise grow;
// unknown keys longer than maxCachedUnknownKey are not kept at all, so
// that the cache's memory stays small whatever callers make up.
const (
	maxKeys             = 10_000
	maxCachedUnknownKey = 256
)

func (k *keyCache) lookup(ctx context.Context, key string) (tenancy.App, string, error) {
	now := time.Now()
	k.mu.Lock()
	e, ok := k.entries[key]
	k.mu.Unlock()
	if ok && now.Sub(e.at) < k.ttl {
		return e.app, e.channel, e.err
	}
	app, channel, err := k.store.AppByChannelKey(ctx, key)
	if err != nil && (!isNotFound(err) || len(key) > maxCachedUnknownKey) {
		return app, channel, err
	}
	k.mu.Lock()
	if len(k.entries) >= maxKeys {
		clear(k.entries)
	}
	k.entries[key] = keyEntry{app: app, channel: channel, err: err, at: now}
	k.mu.Unlock()
	return app, channel, err
}
