package gapinbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/embeddings"
	"github.com/assistantcms/cms/pkg/content/knowledge"
)

// Content is what the inbox reads of an app's content: its FAQs, intents
// and handlers (to name the nearest beside each group), and what its
// authors decided about groups.
type Content interface {
	ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error)
	GapDecisions(ctx context.Context, app string) ([]content.GapDecision, error)
	GapSettings(ctx context.Context, app string) (content.GapSettings, error)
}

// Bounds of the nearest content.
const (
	// maxTextsPerRecord is how many questions of an FAQ, or utterance
	// patterns of an intent, are compared with a group.
	maxTextsPerRecord = 10
	// maxContentTexts bounds the texts of an app's content one build
	// embeds and compares.
	maxContentTexts = 5000
)

// Nearest is the content closest in meaning to a group's representative.
type Nearest struct {
	FAQ     *Match `json:"faq"`
	Intent  *Match `json:"intent"`
	Handler *Match `json:"handler"`
}

// Match is one record and its similarity to a group: the cosine of the
// representative's vector and that of the record's closest text.
type Match struct {
	ID         string  `json:"id"`
	Text       string  `json:"text"`
	Similarity float64 `json:"similarity"`
}

// contentText is one text of an app's content, compared with groups.
type contentText struct {
	kind     content.Kind
	id, text string
}

// contentTexts lists the questions of the app's FAQs and the utterance
// patterns of its intents, at most maxTextsPerRecord of each record and
// maxContentTexts in all, and the intents that have a handler.
func contentTexts(ctx context.Context, c Content, app string) ([]contentText, map[string]bool, error) {
	var out []contentText
	handled := map[string]bool{}
	for _, k := range []struct {
		kind  content.Kind
		field string
	}{{content.KindFAQ, "questions"}, {content.KindIntent, "utterancePatterns"}} {
		recs, err := c.ListRecords(ctx, app, k.kind)
		if err != nil {
			return nil, nil, fmt.Errorf("read the %ss of %s: %w", k.kind, app, err)
		}
		for _, r := range recs {
			var doc map[string]json.RawMessage
			var texts []string
			if json.Unmarshal(r.Doc, &doc) != nil || json.Unmarshal(doc[k.field], &texts) != nil {
				continue
			}
			for _, t := range texts[:min(len(texts), maxTextsPerRecord)] {
				if k.kind == content.KindIntent {
					t = knowledge.PlainPattern(t)
				}
				if t = strings.TrimSpace(t); t != "" && len(out) < maxContentTexts {
					out = append(out, contentText{k.kind, r.ID, t})
				}
			}
		}
	}
	handlers, err := c.ListRecords(ctx, app, content.KindHandler)
	if err != nil {
		return nil, nil, fmt.Errorf("read the handlers of %s: %w", app, err)
	}
	for _, h := range handlers {
		handled[h.ID] = true
	}
	return out, handled, nil
}

// contentIndex is an app's content texts and their vectors.
type contentIndex struct {
	texts   []contentText
	handled map[string]bool
	vs      *embeddings.Vectors
}

// index reads the app's content texts and embeds them with the content's
// embedder, which mostly has their vectors already.
func (b *Builder) index(ctx context.Context, app string) (*contentIndex, error) {
	texts, handled, err := contentTexts(ctx, b.content, app)
	if err != nil {
		return nil, err
	}
	strs := make([]string, len(texts))
	for i, t := range texts {
		strs[i] = t.text
	}
	var tv [][]float32
	if len(strs) > 0 {
		if tv, err = b.cfg.ContentEmbedder.EmbedApp(ctx, app, strs); err != nil {
			return nil, fmt.Errorf("embed the content of %s: %w", app, err)
		}
	}
	vs, err := embeddings.NewVectors(tv)
	if err != nil {
		return nil, fmt.Errorf("compare the content of %s: %w", app, err)
	}
	return &contentIndex{texts: texts, handled: handled, vs: vs}, nil
}

// nearest names, for each of groups among the first maxNearestGroups of
// the build, the FAQ and intent whose texts are closest to its
// representative, and the intent's handler, once for each group of the
// build. Finding them takes the builds' turn, as it may embed the app's
// content.
func (b *Builder) nearest(ctx context.Context, app string, bd *build, groups []Group) error {
	if b.emb == nil || b.content == nil || bd.leaders == nil {
		return nil
	}
	bd.nearestMu.Lock()
	defer bd.nearestMu.Unlock()
	missing := false
	for _, g := range groups {
		if _, ok := bd.nearest[g.rank]; !ok && g.rank < len(bd.leaders) {
			missing = true
		}
	}
	if missing {
		select {
		case b.turn <- struct{}{}:
			defer func() { <-b.turn }()
		case <-ctx.Done():
			return ErrBusy
		}
	}
	if bd.nearest == nil {
		bd.nearest = map[int]*Nearest{}
	}
	var ix *contentIndex
	var sims []float32
	for g := range groups {
		rank := groups[g].rank
		if rank >= len(bd.leaders) {
			continue
		}
		if n, ok := bd.nearest[rank]; ok {
			groups[g].Nearest = n
			continue
		}
		if ix == nil {
			var err error
			if ix, err = b.index(ctx, app); err != nil {
				return err
			}
			sims = make([]float32, len(ix.texts))
		}
		n := &Nearest{}
		if p, ok := ix.vs.Probe(bd.leaders[rank]); ok {
			ix.vs.SimilaritiesTo(p, 0, len(ix.texts), sims)
			for i, t := range ix.texts {
				s := float64(sims[i])
				best := &n.FAQ
				if t.kind == content.KindIntent {
					best = &n.Intent
				}
				if *best == nil || s > (*best).Similarity {
					*best = &Match{ID: t.id, Text: t.text, Similarity: s}
				}
			}
			if n.Intent != nil && ix.handled[n.Intent.ID] {
				n.Handler = &Match{ID: n.Intent.ID, Text: n.Intent.Text, Similarity: n.Intent.Similarity}
			}
		}
		bd.nearest[rank] = n
		groups[g].Nearest = n
	}
	return nil
}

// decide gives each group its state from the decisions of its app,
// newest first: a group decided on (by its ID, or by a wording it shares
// with the decision) is resolved until one of its questions goes
// unanswered after the decision, and dismissed until it has regrow times
// the users it had.
func decide(groups []Group, decisions []content.GapDecision, regrow float64) {
	byGroup := map[string]*content.GapDecision{}
	byWording := map[string]*content.GapDecision{}
	for i := range decisions {
		d := &decisions[i]
		if byGroup[d.GroupID] == nil {
			byGroup[d.GroupID] = d
		}
		for _, w := range d.Wordings {
			if byWording[w] == nil {
				byWording[w] = d
			}
		}
	}
	for i := range groups {
		g := &groups[i]
		g.State = StateOpen
		d := byGroup[g.ID]
		for _, w := range g.Wordings {
			if o := byWording[w.Query]; o != nil && (d == nil || o.AuditID > d.AuditID) {
				d = o
			}
		}
		if d == nil {
			continue
		}
		g.Decision = &Decision{GroupID: d.GroupID, State: string(d.State), Reason: d.Reason, Users: d.Users, DecidedAt: d.DecidedAt}
		switch {
		case d.State == content.GapResolved && !g.LastSeen.After(d.DecidedAt):
			g.State = StateResolved
		case d.State == content.GapDismissed && float64(g.Users) < regrow*float64(max(d.Users, 1)):
			g.State = StateDismissed
		default:
			g.Reopened = true
		}
	}
}
