package gapinbox

import (
	"context"
	"fmt"

	"github.com/assistantcms/cms/pkg/content"
)

// Request chooses an inbox.
type Request struct {
	App  string
	Days int
	// LowConfidence is the threshold; nil takes the app's setting.
	LowConfidence *float64
	// State is the state of the groups to list (StateOpen when empty).
	State string
}

// Answer is the inbox r asks for: the build's groups in r.State, at most
// MaxGroups, each with the decision that applies (read anew, so that an
// action shows at once) and its nearest content.
func (b *Builder) Answer(ctx context.Context, r Request) (Inbox, error) {
	settings := content.DefaultGapSettings()
	var decisions []content.GapDecision
	if b.content != nil {
		var err error
		if settings, err = b.content.GapSettings(ctx, r.App); err != nil {
			return Inbox{}, fmt.Errorf("read the gap settings of %s: %w", r.App, err)
		}
		if decisions, err = b.content.GapDecisions(ctx, r.App); err != nil {
			return Inbox{}, fmt.Errorf("read the gap decisions of %s: %w", r.App, err)
		}
	}
	threshold := settings.LowConfidence
	if r.LowConfidence != nil {
		threshold = *r.LowConfidence
	}
	state := r.State
	if state == "" {
		state = StateOpen
	}
	bd, err := b.shared(ctx, r.App, r.Days, threshold)
	if err != nil {
		return Inbox{}, err
	}
	in := bd.inbox
	all := make([]Group, len(in.Groups))
	copy(all, in.Groups)
	decide(all, decisions, settings.RegrowFactor)
	in.State, in.Groups = state, make([]Group, 0, min(len(all), MaxGroups))
	for _, g := range all {
		if state != StateAll && g.State != state {
			continue
		}
		if len(in.Groups) == MaxGroups {
			in.MoreGroups++
			continue
		}
		in.Groups = append(in.Groups, g)
	}
	if err := b.nearest(ctx, r.App, bd, in.Groups); err != nil {
		return Inbox{}, err
	}
	return in, nil
}
