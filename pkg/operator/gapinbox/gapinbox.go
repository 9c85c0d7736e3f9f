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
	"slices"
	"sync"
	"time"

	"github.com/assistantcms/cms/pkg/content/gapgroup"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
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
	Wordings  int     `json:"wordings"`
	Truncated bool    `json:"truncated"`
	Groups    []Group `json:"groups"`
	// MoreGroups counts the groups past MaxGroups.
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
	src Source
	emb Embedder
	cfg Config
	// now is the clock the days end on; tests set it.
	now func() time.Time
	// turn lets one build run at a time: a build takes both cores for up
	// to a few seconds.
	turn chan struct{}

	mu     sync.Mutex
	recent map[key]*build
	// reference is the mean vector of gapgroup.ReferenceQuestions, once
	// embedded.
	reference []float32
}

// maxRecent bounds the builds kept to be answered again: an inbox holds
// at most MaxWordings wordings, about 1 MiB at the default, so the kept
// builds hold a few tens of MiB at most.
const maxRecent = 32

type key struct {
	app           string
	days          int
	lowConfidence float64
}

// build is one inbox being built, or built.
type build struct {
	done  chan struct{}
	inbox Inbox
	err   error
}

// New returns a Builder reading src and embedding with emb (nil: group
// by words).
func New(src Source, emb Embedder, cfg Config) *Builder {
	if cfg.MaxWordings <= 0 {
		cfg.MaxWordings = DefaultMaxWordings
	}
	if cfg.FreshFor <= 0 {
		cfg.FreshFor = DefaultFreshFor
	}
	return &Builder{src: src, emb: emb, cfg: cfg, now: time.Now, turn: make(chan struct{}, 1), recent: map[key]*build{}}
}

// ErrBusy is Build's error when another build held the process past the
// request's deadline.
var ErrBusy = errors.New("another gap inbox is being built")

// Build returns the inbox of app over the days ending today, with
// lowConfidence as its threshold. Requests for the same inbox share a
// build; a build answers them until FreshFor has passed.
func (b *Builder) Build(ctx context.Context, app string, days int, lowConfidence float64) (Inbox, error) {
	if err := analyticsreport.CheckLowConfidence(lowConfidence); err != nil {
		return Inbox{}, err
	}
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
		bd = &build{done: make(chan struct{})}
		b.forgetStaleLocked()
		b.recent[k] = bd
		b.mu.Unlock()
		bd.inbox, bd.err = b.build(ctx, k)
		close(bd.done)
		return bd.inbox, bd.err
	}
	b.mu.Unlock()
	select {
	case <-bd.done:
		return bd.inbox, bd.err
	case <-ctx.Done():
		return Inbox{}, ctx.Err()
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

func (b *Builder) build(ctx context.Context, k key) (Inbox, error) {
	select {
	case b.turn <- struct{}{}:
		defer func() { <-b.turn }()
	case <-ctx.Done():
		return Inbox{}, ErrBusy
	}
	now := b.now().UTC()
	y, m, d := now.Date()
	to := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	from := to.AddDate(0, 0, 1-k.days)
	words, err := b.src.Gaps(ctx, analyticsreport.GapQuery{AppID: k.app, From: from, To: to, LowConfidence: k.lowConfidence, Limit: b.cfg.MaxWordings + 1})
	if err != nil {
		return Inbox{}, err
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
	if b.emb != nil && len(texts) > 0 {
		reference, err := b.referenceMean(ctx)
		if err != nil {
			return Inbox{}, err
		}
		vectors, err := b.emb.EmbedApp(ctx, k.app, texts)
		if err != nil {
			return Inbox{}, fmt.Errorf("embed the gaps of %s: %w", k.app, err)
		}
		if groups, err = gapgroup.ByMeaning(vectors, reference, gapgroup.DefaultThreshold); err != nil {
			return Inbox{}, fmt.Errorf("group the gaps of %s: %w", k.app, err)
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
	if len(in.Groups) > MaxGroups {
		in.MoreGroups = len(in.Groups) - MaxGroups
		in.Groups = in.Groups[:MaxGroups]
	}
	return in, nil
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
		Reasons: map[string]uint64{}}
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
