// Package resubmit sends quarantined events through validation again, for
// when a limit or rule that refused them has changed: the events that now
// pass are published to the events topic with the event IDs and receive
// times they got when first received, so that running it twice, or
// alongside the consumer, stores each event once. ClickHouse reads the
// quarantined events, and looks stored ones up, in the pipeline's tables.
package resubmit

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// Store is where quarantined events are read and stored events looked up.
type Store interface {
	QuarantineKeys(ctx context.Context, f Filter) ([]QuarantineKey, error)
	StoredEventIDs(ctx context.Context, keys []QuarantineKey) (map[EventKey]bool, error)
	QuarantinedEvents(ctx context.Context, keys []QuarantineKey) (map[EventKey]string, error)
}

// Publisher stores accepted records durably.
type Publisher interface {
	Publish(ctx context.Context, accepted, quarantined []event.Record) error
}

// Options tune a run.
type Options struct {
	// Chunk is how many events are read, checked and published at a time.
	Chunk int
	// DryRun validates and counts without publishing.
	DryRun bool
	// Progress, when set, receives the counts after every chunk.
	Progress func(Counts)
}

// Counts are what a run did so far.
type Counts struct {
	// Selected is every quarantined event the filter chose.
	Selected int
	// Done is how many of them were looked at.
	Done int
	// Resubmitted passed validation and were published (or would be, in
	// a dry run).
	Resubmitted int
	// AlreadyStored were in the events table already: resubmitted before.
	AlreadyStored int
	// StillInvalid fail validation under the current rules, by reason of
	// their first error.
	StillInvalid map[string]int
	// Truncated were too large for one record and only their first part
	// was kept: they cannot be resubmitted.
	Truncated int
}

func (c Counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d looked at: %d resubmitted, %d already stored, %d cut when quarantined",
		c.Done, c.Selected, c.Resubmitted, c.AlreadyStored, c.Truncated)
	invalid := 0
	for _, n := range c.StillInvalid {
		invalid += n
	}
	fmt.Fprintf(&b, ", %d still invalid", invalid)
	if invalid > 0 {
		b.WriteString(" (")
		for i, r := range slices.Sorted(maps.Keys(c.StillInvalid)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d", r, c.StillInvalid[r])
		}
		b.WriteString(")")
	}
	return b.String()
}

// Run resubmits the quarantined events the filter chooses.
func Run(ctx context.Context, store Store, v *event.Validator, pub Publisher, f Filter, o Options, log *slog.Logger) (Counts, error) {
	if o.Chunk <= 0 {
		o.Chunk = 500
	}
	c := Counts{StillInvalid: map[string]int{}}
	keys, err := store.QuarantineKeys(ctx, f)
	if err != nil {
		return c, err
	}
	c.Selected = len(keys)
	for start := 0; start < len(keys); start += o.Chunk {
		chunk := keys[start:min(start+o.Chunk, len(keys))]
		if err := resubmitChunk(ctx, store, v, pub, chunk, o.DryRun, &c); err != nil {
			return c, err
		}
		c.Done += len(chunk)
		if o.Progress != nil {
			o.Progress(c)
		}
	}
	log.Info("resubmission done", "selected", c.Selected, "resubmitted", c.Resubmitted, "already_stored", c.AlreadyStored,
		"truncated", c.Truncated, "still_invalid", c.StillInvalid, "dry_run", o.DryRun)
	return c, nil
}

func resubmitChunk(ctx context.Context, store Store, v *event.Validator, pub Publisher, keys []QuarantineKey, dryRun bool, c *Counts) error {
	stored, err := store.StoredEventIDs(ctx, keys)
	if err != nil {
		return err
	}
	var pending []QuarantineKey
	for _, k := range keys {
		switch {
		case stored[EventKey{AppID: k.AppID, EventID: k.EventID}]:
			c.AlreadyStored++
		case k.Truncated:
			c.Truncated++
		default:
			pending = append(pending, k)
		}
	}
	events, err := store.QuarantinedEvents(ctx, pending)
	if err != nil {
		return err
	}
	var accepted []event.Record
	var results []*event.Result
	defer func() {
		for _, r := range results {
			r.Release()
		}
	}()
	for _, k := range pending {
		raw, ok := events[EventKey{AppID: k.AppID, EventID: k.EventID}]
		if !ok {
			return fmt.Errorf("quarantined event %s of app %s vanished while resubmitting", k.EventID, k.AppID)
		}
		meta := event.Meta{AppID: k.AppID, OrganizationID: k.OrganizationID, ReceivedAt: k.ReceivedAt, EventIDs: []string{k.EventID}}
		res, err := v.ProcessBatch([]byte(`{"events":[`+raw+`]}`), meta)
		if err != nil {
			return fmt.Errorf("check quarantined event %s of app %s: %w", k.EventID, k.AppID, err)
		}
		results = append(results, res)
		if len(res.Accepted) == 0 {
			c.StillInvalid[res.Errors[0].Reason]++
			continue
		}
		accepted = append(accepted, res.Accepted...)
	}
	if len(accepted) > 0 && !dryRun {
		if err := pub.Publish(ctx, accepted, nil); err != nil {
			results = nil // the producer may still hold the records
			return fmt.Errorf("publish %d resubmitted events: %w", len(accepted), err)
		}
	}
	c.Resubmitted += len(accepted)
	return nil
}
