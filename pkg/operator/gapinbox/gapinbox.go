// Package gapinbox is an app's gap inbox: the questions its assistant
// could not answer (fallback turns, knowledge-base turns that found
// nothing, turns matched below the app's threshold), read from the
// gap_daily rollup and grouped by meaning with the built-in sentence
// encoder, so that its authors see each need once, ranked by the users
// it left without an answer.
//
// It lives under pkg/operator because it joins the two halves: the
// pipeline's rollups and the content side's encoder and grouping. The
// api's command mounts it on the client address, behind a token holding
// events:read.
package gapinbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/content/gapgroup"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	"github.com/assistantcms/cms/pkg/ratelimit"
)

// Source reads the wordings that went unanswered.
type Source interface {
	Gaps(ctx context.Context, q analyticsreport.GapQuery) ([]analyticsreport.GapWording, error)
}

// Embedder embeds an app's texts; nil groups by words.
type Embedder interface {
	EmbedApp(ctx context.Context, app string, texts []string) ([][]float32, error)
}

// Defaults of Config.
const (
	DefaultMaxWordings = 5000
	DefaultFreshFor    = time.Minute
	// DefaultBuildsPerMinute bounds the builds of one app: inboxes of
	// other ranges and thresholds, which no earlier build answers.
	DefaultBuildsPerMinute = 10
	// MaxGroups is how many groups an inbox lists, MaxListed how many
	// wordings of a group it names.
	MaxGroups = 200
	MaxListed = 50
)

// Config bounds what an inbox costs.
type Config struct {
	// MaxWordings is how many distinct wordings, those asked by most
	// users first, one inbox reads and groups: it bounds the memory and
	// the time of one inbox, whatever an app's users (or a flood of
	// invented questions) asked.
	MaxWordings int
	// FreshFor is how long an inbox is answered again without being
	// built anew.
	FreshFor time.Duration
	// BuildsPerMinute bounds the builds of one app (a burst of as
	// many), so that one app's authors asking for ever other inboxes
	// cannot take every build's turn from the others.
	BuildsPerMinute int
	// ContentEmbedder embeds the app's FAQ questions and utterance
	// patterns, to find each group's nearest: the embedder the content's
	// vectors are kept by, so that they are mostly there already. Nil:
	// the Builder's embedder.
	ContentEmbedder Embedder
}

// Inbox is an app's unanswered questions over a range of days, grouped.
type Inbox struct {
	AppID string `json:"appId"`
	// From and To are the first and last day, as 2006-01-02 (UTC).
	From          string  `json:"from"`
	To            string  `json:"to"`
	LowConfidence float64 `json:"lowConfidence"`
	// GroupedBy is "meaning" (the built-in encoder) or "words" (an api
	// without it).
	GroupedBy string `json:"groupedBy"`
	// Wordings counts the distinct wordings read; Truncated says more
	// went unanswered than were read.
	Wordings  int  `json:"wordings"`
	Truncated bool `json:"truncated"`
	// State is the state of the groups listed: open (the default),
	// resolved, dismissed or all.
	State  string  `json:"state"`
	Groups []Group `json:"groups"`
	// MoreGroups counts the groups in the state past MaxGroups.
	MoreGroups int `json:"moreGroups"`
	// BuiltAt is when the inbox was built; it is answered again until
	// FreshFor has passed.
	BuiltAt time.Time `json:"builtAt"`
}

// Group is one need: wordings close in meaning to the most asked of
// them, its representative.
type Group struct {
	// ID names the group by its representative within the app.
	ID             string    `json:"id"`
	Representative string    `json:"representative"`
	Wordings       []Wording `json:"wordings"`
	// MoreWordings counts the wordings past MaxListed.
	MoreWordings int    `json:"moreWordings"`
	Asked        uint64 `json:"asked"`
	// Users adds up the users of each wording: a user who asked in two
	// wordings counts twice.
	Users     uint64    `json:"users"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	ThisWeek  uint64    `json:"thisWeek"`
	LastWeek  uint64    `json:"lastWeek"`
	// Reasons counts the wordings' turns by why they went unanswered:
	// fallback, knowledge_base, low_confidence.
	Reasons map[string]uint64 `json:"reasons"`
	// State is open, resolved or dismissed; Reopened says an open group
	// was resolved or dismissed, and Decision is the decision that
	// applies (nil for none).
	State    string    `json:"state"`
	Reopened bool      `json:"reopened"`
	Decision *Decision `json:"decision"`
	// Nearest is the content closest in meaning (nil without the
	// built-in encoder).
	Nearest *Nearest `json:"nearest"`

	// lead is the representative's index among the build's wordings,
	// rank the group's among the build's groups.
	lead, rank int
}

// States of a group, and the request for every group.
const (
	StateOpen      = "open"
	StateResolved  = "resolved"
	StateDismissed = "dismissed"
	StateAll       = "all"
)

// Decision is an authors' decision about a group, as the inbox shows it.
type Decision struct {
	GroupID   string    `json:"groupId"`
	State     string    `json:"state"`
	Reason    string    `json:"reason"`
	Users     int64     `json:"users"`
	DecidedAt time.Time `json:"decidedAt"`
}

// Wording is one wording of a group.
type Wording struct {
	Query    string    `json:"query"`
	Asked    uint64    `json:"asked"`
	Users    uint64    `json:"users"`
	LastSeen time.Time `json:"lastSeen"`
	Reason   string    `json:"reason"`
}

// Builder builds inboxes, one at a time in the process, and answers the
// same request again from the last build while it is fresh.
type Builder struct {
	src     Source
	content Content // nil: no decisions, nothing nearest
	emb     Embedder
	cfg     Config
	// now is the clock the days end on; tests set it.
	now func() time.Time
	// turn lets one build run at a time: a build takes both cores for up
	// to a few seconds.
	turn chan struct{}
	// perApp counts each app's builds.
	perApp *ratelimit.Limiter

	// reference is the mean vector of gapgroup.ReferenceQuestions, once
	// embedded; read and written holding the turn.
	reference []float32

	mu     sync.Mutex
	recent map[key]*build
}

// maxRecent bounds the builds kept to be answered again, and
// maxNearestGroups the groups of a build that name their nearest content
// (a build keeps their representatives' vectors, 2 KiB each): a kept
// build holds its wordings (MaxWordings of at most 500 bytes) and 2 MiB
// of vectors.
const (
	maxRecent        = 16
	maxNearestGroups = 1000
)

type key struct {
	app           string
	days          int
	lowConfidence float64
}

// build is one inbox being built, or built: every group of the range,
// ranked, and what finding their nearest content takes.
type build struct {
	done  chan struct{}
	inbox Inbox
	err   error
	// leaders are the vectors of the representatives of the first
	// maxNearestGroups groups, by rank (nil when grouped by words).
	leaders [][]float32
	// nearest is each group's nearest content by rank, found for the
	// groups answered, once each.
	nearestMu sync.Mutex
	nearest   map[int]*Nearest
}

// New returns a Builder reading src and c (nil: no decisions, nothing
// nearest) and embedding with emb (nil: group by words, nothing nearest).
func New(src Source, c Content, emb Embedder, cfg Config) *Builder {
	if cfg.MaxWordings <= 0 {
		cfg.MaxWordings = DefaultMaxWordings
	}
	if cfg.FreshFor <= 0 {
		cfg.FreshFor = DefaultFreshFor
	}
	if cfg.BuildsPerMinute <= 0 {
		cfg.BuildsPerMinute = DefaultBuildsPerMinute
	}
	if cfg.ContentEmbedder == nil {
		cfg.ContentEmbedder = emb
	}
	b := &Builder{src: src, content: c, emb: emb, cfg: cfg, now: time.Now, turn: make(chan struct{}, 1), recent: map[key]*build{}}
	b.perApp = ratelimit.New(float64(cfg.BuildsPerMinute)/60, cfg.BuildsPerMinute, func() time.Time { return b.now() })
	return b
}

// ErrBusy is Answer's error when the request's deadline passed before its
// inbox was built: the build goes on, and answers a later request.
var ErrBusy = errors.New("the gap inbox is being built")

// buildLimit bounds one build, its wait for its turn included.
const buildLimit = 2 * time.Minute

// TooManyBuilds is Answer's error when an app's builds are over
// Config.BuildsPerMinute.
type TooManyBuilds struct{ RetryAfter time.Duration }

func (e *TooManyBuilds) Error() string {
	return fmt.Sprintf("this app's gap inboxes were built too often; retry in %s, or ask again for one built in the last minute", e.RetryAfter.Round(time.Second))
}

// shared returns the build of every group of app over the days ending
// today, with lowConfidence as its threshold. Requests for the same inbox
// share a build; a build answers them until FreshFor has passed.
func (b *Builder) shared(ctx context.Context, app string, days int, lowConfidence float64) (*build, error) {
	if err := analyticsreport.CheckLowConfidence(lowConfidence); err != nil {
		return nil, err
	}
	// One key for each band, however the threshold was spelled: bands
	// are multiples of 0.05, exact to two places.
	lowConfidence = math.Round(lowConfidence*100) / 100
	k := key{app, days, lowConfidence}
	b.mu.Lock()
	bd := b.recent[k]
	if bd != nil {
		select {
		case <-bd.done:
			if bd.err != nil || b.now().Sub(bd.inbox.BuiltAt) >= b.cfg.FreshFor {
				bd = nil
			}
		default: // being built: wait for it
		}
	}
	if bd == nil {
		if ok, wait := b.perApp.Allow(app); !ok {
			b.mu.Unlock()
			return nil, &TooManyBuilds{RetryAfter: wait}
		}
		bd = &build{done: make(chan struct{})}
		b.forgetStaleLocked()
		b.recent[k] = bd
		b.mu.Unlock()
		// The build is the app's, not the request's: it goes on when the
		// client that started it leaves, for those waiting and the next
		// to ask, within its own time.
		go func() {
			defer close(bd.done)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), buildLimit)
			defer cancel()
			defer func() {
				if p := recover(); p != nil {
					bd.err = fmt.Errorf("build the gap inbox of %s: %v", app, p)
				}
			}()
			bd.err = b.build(ctx, k, bd)
		}()
	} else {
		b.mu.Unlock()
	}
	select {
	case <-bd.done:
		return bd, bd.err
	case <-ctx.Done():
		return nil, ErrBusy
	}
}

// forgetStaleLocked drops finished builds past their freshness, and the
// oldest when too many are kept.
func (b *Builder) forgetStaleLocked() {
	now := b.now()
	var oldest key
	var oldestAt time.Time
	for k, bd := range b.recent {
		select {
		case <-bd.done:
			if bd.err != nil || now.Sub(bd.inbox.BuiltAt) >= b.cfg.FreshFor {
				delete(b.recent, k)
				continue
			}
			if oldestAt.IsZero() || bd.inbox.BuiltAt.Before(oldestAt) {
				oldest, oldestAt = k, bd.inbox.BuiltAt
			}
		default:
		}
	}
	if len(b.recent) >= maxRecent && !oldestAt.IsZero() {
		delete(b.recent, oldest)
	}
}

func (b *Builder) build(ctx context.Context, k key, bd *build) error {
	select {
	case b.turn <- struct{}{}:
		defer func() { <-b.turn }()
	case <-ctx.Done():
		return fmt.Errorf("build the gap inbox of %s: no turn within %v: %w", k.app, buildLimit, ctx.Err())
	}
	now := b.now().UTC()
	y, m, d := now.Date()
	to := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	from := to.AddDate(0, 0, 1-k.days)
	words, err := b.src.Gaps(ctx, analyticsreport.GapQuery{AppID: k.app, From: from, To: to, LowConfidence: k.lowConfidence, Limit: b.cfg.MaxWordings + 1})
	if err != nil {
		return err
	}
	in := Inbox{AppID: k.app, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), LowConfidence: k.lowConfidence,
		GroupedBy: "words", BuiltAt: now}
	if len(words) > b.cfg.MaxWordings {
		words, in.Truncated = words[:b.cfg.MaxWordings], true
	}
	in.Wordings = len(words)
	texts := make([]string, len(words))
	for i, w := range words {
		texts[i] = w.Query
	}
	var groups [][]int
	var vectors [][]float32
	if b.emb != nil && len(texts) > 0 {
		reference, err := b.referenceMean(ctx)
		if err != nil {
			return err
		}
		if vectors, err = b.emb.EmbedApp(ctx, k.app, texts); err != nil {
			return fmt.Errorf("embed the gaps of %s: %w", k.app, err)
		}
		if groups, err = gapgroup.ByMeaning(vectors, reference, gapgroup.DefaultThreshold); err != nil {
			return fmt.Errorf("group the gaps of %s: %w", k.app, err)
		}
		in.GroupedBy = "meaning"
	} else {
		groups = gapgroup.ByWords(texts, gapgroup.DefaultWordsThreshold)
	}
	in.Groups = make([]Group, 0, len(groups))
	for _, members := range groups {
		in.Groups = append(in.Groups, summarise(words, members))
	}
	slices.SortFunc(in.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Users, a.Users), cmp.Compare(b.Asked, a.Asked), cmp.Compare(a.Representative, b.Representative))
	})
	for i := range in.Groups {
		in.Groups[i].rank = i
		if vectors != nil && i < maxNearestGroups {
			bd.leaders = append(bd.leaders, vectors[in.Groups[i].lead])
		}
	}
	bd.inbox = in
	return nil
}

// referenceMean embeds the reference questions on first use; builds take
// turns, so one embeds them.
func (b *Builder) referenceMean(ctx context.Context) ([]float32, error) {
	if b.reference != nil {
		return b.reference, nil
	}
	vs, err := b.emb.EmbedApp(ctx, "", gapgroup.ReferenceQuestions())
	if err != nil {
		return nil, fmt.Errorf("embed the reference questions: %w", err)
	}
	b.reference = gapgroup.Mean(vs)
	return b.reference, nil
}

// summarise is the group of words' members, the first its
// representative.
func summarise(words []analyticsreport.GapWording, members []int) Group {
	lead := words[members[0]]
	sum := sha256.Sum256([]byte(lead.Query))
	g := Group{ID: hex.EncodeToString(sum[:8]), Representative: lead.Query, FirstSeen: lead.FirstSeen, LastSeen: lead.LastSeen,
		Reasons: map[string]uint64{}, State: StateOpen, lead: members[0]}
	for n, i := range members {
		w := words[i]
		g.Asked += w.Asked
		g.Users += w.Users
		g.ThisWeek += w.ThisWeek
		g.LastWeek += w.LastWeek
		g.Reasons[w.Reason] += w.Asked
		if w.FirstSeen.Before(g.FirstSeen) {
			g.FirstSeen = w.FirstSeen
		}
		if w.LastSeen.After(g.LastSeen) {
			g.LastSeen = w.LastSeen
		}
		if n < MaxListed {
			g.Wordings = append(g.Wordings, Wording{Query: w.Query, Asked: w.Asked, Users: w.Users, LastSeen: w.LastSeen, Reason: w.Reason})
		} else {
			g.MoreWordings++
		}
	}
	return g
}
