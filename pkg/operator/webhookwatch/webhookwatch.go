// Package webhookwatch tells the apps' webhooks what their analytics
// show: groups new to the gap inbox (gaps.opened) and ERROR events past
// the rate an endpoint set (errors.rate). It reads only for the apps
// whose endpoints asked, and tells each endpoint of a group, or of a
// minute, once: what was told is recorded with the message, in the
// content database, so that any number of api processes may watch.
package webhookwatch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
)

// Store is where endpoints are read and messages queued.
type Store interface {
	WebhooksFor(ctx context.Context, topic string) ([]webhooks.Webhook, error)
	TellWebhook(ctx context.Context, app, webhook, topic string, keys []string, payload func(fresh []string) ([]byte, error)) (int, error)
}

// ErrorCounter counts the ERROR events each app's runtimes sent since a
// time (analyticsreport.ErrorCounts).
type ErrorCounter func(ctx context.Context, apps []string, since time.Time) (map[string]uint64, error)

// Inboxes answers an app's gap inbox (a gapinbox.Builder).
type Inboxes interface {
	Answer(ctx context.Context, r gapinbox.Request) (gapinbox.Inbox, error)
}

// Config paces the watch.
type Config struct {
	// ErrorsEvery is how often ERROR events are counted, over the minute
	// before; GapsEvery how often the inboxes are read.
	ErrorsEvery, GapsEvery time.Duration
	// GapDays is the range of days an inbox is read over.
	GapDays int
}

// Defaults of Config.
const (
	DefaultErrorsEvery = time.Minute
	DefaultGapsEvery   = 15 * time.Minute
	DefaultGapDays     = 7
	// maxListed bounds the groups one gaps.opened message lists.
	maxListed = 20
)

// Watcher watches for the topics.
type Watcher struct {
	cfg     Config
	store   Store
	errors  ErrorCounter
	inboxes Inboxes
	log     *slog.Logger
	// told is called after a message was queued (the deliverer's Wake).
	told func()
	now  func() time.Time
}

// New returns a Watcher; errs or inboxes nil leave their topic unwatched
// (an api without ClickHouse).
func New(cfg Config, store Store, errs ErrorCounter, inboxes Inboxes, told func(), log *slog.Logger) *Watcher {
	if cfg.ErrorsEvery <= 0 {
		cfg.ErrorsEvery = DefaultErrorsEvery
	}
	if cfg.GapsEvery <= 0 {
		cfg.GapsEvery = DefaultGapsEvery
	}
	if cfg.GapDays <= 0 {
		cfg.GapDays = DefaultGapDays
	}
	if told == nil {
		told = func() {}
	}
	return &Watcher{cfg: cfg, store: store, errors: errs, inboxes: inboxes, told: told, log: log, now: time.Now}
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	errTick, gapTick := time.NewTicker(w.cfg.ErrorsEvery), time.NewTicker(w.cfg.GapsEvery)
	defer errTick.Stop()
	defer gapTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-errTick.C:
			if err := w.CheckErrors(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("watching ERROR rates for webhooks failed; trying again at the next interval", "err", err)
			}
		case <-gapTick.C:
			if err := w.CheckGaps(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("watching gap inboxes for webhooks failed; trying again at the next interval", "err", err)
			}
		}
	}
}

// message is a watched topic's body, as the content topics' are.
type message struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

func (w *Watcher) body(topic string, data any) ([]byte, error) {
	return json.Marshal(message{Type: topic, Timestamp: w.now().UTC().Format(time.RFC3339Nano), Data: data})
}

// errorRate is what errors.rate tells.
type errorRate struct {
	AppID string `json:"appId"`
	// Errors were received in the minute from Since; more than PerMinute,
	// the endpoint's rate.
	Errors    uint64 `json:"errors"`
	PerMinute int    `json:"perMinute"`
	Since     string `json:"since"`
}

// CheckErrors counts the ERROR events of the last minute of every app
// with an errors.rate endpoint, and tells those whose rate was passed,
// once a minute at most.
func (w *Watcher) CheckErrors(ctx context.Context) error {
	if w.errors == nil {
		return nil
	}
	hooks, err := w.store.WebhooksFor(ctx, webhooks.TopicErrorRate)
	if err != nil || len(hooks) == 0 {
		return err
	}
	var apps []string
	for i, h := range hooks {
		if i == 0 || hooks[i-1].AppID != h.AppID {
			apps = append(apps, h.AppID)
		}
	}
	now := w.now().UTC().Truncate(time.Second)
	since := now.Add(-time.Minute)
	counts, err := w.errors(ctx, apps, since)
	if err != nil {
		return err
	}
	minute := now.Truncate(time.Minute).Format("2006-01-02T15:04")
	var errs []error
	for _, h := range hooks {
		n := counts[h.AppID]
		if n <= uint64(h.ErrorRate) || n == 0 {
			continue
		}
		data := errorRate{AppID: h.AppID, Errors: n, PerMinute: h.ErrorRate, Since: since.Format(time.RFC3339)}
		told, err := w.store.TellWebhook(ctx, h.AppID, h.ID, webhooks.TopicErrorRate, []string{minute}, func([]string) ([]byte, error) {
			return w.body(webhooks.TopicErrorRate, data)
		})
		errs = append(errs, err)
		if told > 0 {
			w.told()
		}
	}
	return errors.Join(errs...)
}

// gapGroup is a group as gaps.opened lists it.
type gapGroup struct {
	ID             string `json:"id"`
	Representative string `json:"representative"`
	Users          uint64 `json:"users"`
	Asked          uint64 `json:"asked"`
	Reopened       bool   `json:"reopened"`
}

// gapsOpened is what gaps.opened tells.
type gapsOpened struct {
	AppID  string     `json:"appId"`
	Groups []gapGroup `json:"groups"`
	// More counts the new groups past those listed.
	More int `json:"more"`
}

// CheckGaps reads the gap inbox of every app with a gaps.opened endpoint
// and tells each endpoint of the open groups first asked after it was
// registered, or opened again, that it was not told of.
func (w *Watcher) CheckGaps(ctx context.Context) error {
	if w.inboxes == nil {
		return nil
	}
	hooks, err := w.store.WebhooksFor(ctx, webhooks.TopicGapsOpened)
	if err != nil || len(hooks) == 0 {
		return err
	}
	var errs []error
	inboxes := map[string]gapinbox.Inbox{}
	for _, h := range hooks {
		in, ok := inboxes[h.AppID]
		if !ok {
			if in, err = w.inboxes.Answer(ctx, gapinbox.Request{App: h.AppID, Days: w.cfg.GapDays}); err != nil {
				var busy *gapinbox.TooManyBuilds
				if !errors.As(err, &busy) {
					errs = append(errs, err)
				}
				continue
			}
			inboxes[h.AppID] = in
		}
		byKey := map[string]gapinbox.Group{}
		var keys []string
		for _, g := range in.Groups {
			key := g.ID
			switch {
			case g.Reopened && g.Decision != nil:
				key = "reopened/" + g.ID + "/" + g.Decision.DecidedAt.UTC().Format(time.RFC3339Nano)
			case g.FirstSeen.Before(h.CreatedAt):
				continue // there before the endpoint was
			}
			byKey[key] = g
			keys = append(keys, key)
		}
		told, err := w.store.TellWebhook(ctx, h.AppID, h.ID, webhooks.TopicGapsOpened, keys, func(fresh []string) ([]byte, error) {
			data := gapsOpened{AppID: h.AppID, Groups: []gapGroup{}}
			for _, k := range fresh {
				if len(data.Groups) == maxListed {
					data.More++
					continue
				}
				g := byKey[k]
				data.Groups = append(data.Groups, gapGroup{ID: g.ID, Representative: g.Representative, Users: g.Users, Asked: g.Asked, Reopened: g.Reopened})
			}
			return w.body(webhooks.TopicGapsOpened, data)
		})
		errs = append(errs, err)
		if told > 0 {
			w.told()
		}
	}
	return errors.Join(errs...)
}
