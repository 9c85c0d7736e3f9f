package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/edge/egress"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/operator/webhookwatch"
)

// webhookFlags are the settings of webhook deliveries.
type webhookFlags struct {
	send                   *bool
	allow                  *string
	timeout, poll          *time.Duration
	retryFirst, retryLong  *time.Duration
	retryFor               *time.Duration
	workers, perApp        *int
	errorsEvery, gapsEvery *time.Duration
}

func defineWebhookFlags(fs *envflag.Set) webhookFlags {
	return webhookFlags{
		send: fs.Bool("webhook-send", "WEBHOOK_SEND", true, "send the apps' webhook deliveries from this process (any number of replicas may; each delivery goes out from one)"),
		allow: fs.String("webhook-allow-nets", "WEBHOOK_ALLOW_NETS", "",
			"networks (CIDR or addresses, comma-separated) webhook URLs may reach though not public; loopback, private, link-local and metadata addresses are refused otherwise, when a webhook is registered and at every connection"),
		timeout:    fs.Duration("webhook-timeout", "WEBHOOK_TIMEOUT", egress.DefaultTimeout, "bound on one delivery: connecting, sending and reading the answer (its first 4 KiB)"),
		poll:       fs.Duration("webhook-poll", "WEBHOOK_POLL", webhooks.DefaultPoll, "how often the outbox is read for deliveries queued by other processes or due for a retry"),
		retryFirst: fs.Duration("webhook-retry-first", "WEBHOOK_RETRY_FIRST", webhooks.DefaultRetry.First, "wait after a delivery's first failure; it doubles after each, with jitter"),
		retryLong:  fs.Duration("webhook-retry-longest", "WEBHOOK_RETRY_LONGEST", webhooks.DefaultRetry.Longest, "longest wait between two attempts at a delivery"),
		retryFor:   fs.Duration("webhook-retry-for", "WEBHOOK_RETRY_FOR", webhooks.DefaultRetry.For, "how long a delivery is retried before it is marked failed"),
		workers:    fs.Int("webhook-workers", "WEBHOOK_WORKERS", webhooks.DefaultWorkers, "deliveries sent at once by this process"),
		perApp:     fs.Int("webhook-per-app", "WEBHOOK_PER_APP", webhooks.DefaultPerApp, "deliveries of one app sent at once by this process, so that its slow endpoints hold no more of the others' workers"),
		errorsEvery: fs.Duration("webhook-errors-every", "WEBHOOK_ERRORS_EVERY", webhookwatch.DefaultErrorsEvery,
			"how often the ERROR events of the last minute are counted for errors.rate webhooks (only apps with one are read)"),
		gapsEvery: fs.Duration("webhook-gaps-every", "WEBHOOK_GAPS_EVERY", webhookwatch.DefaultGapsEvery,
			"how often the gap inboxes of apps with gaps.opened webhooks are read for new groups"),
	}
}

// check validates the settings and answers the networks allowed.
func (f webhookFlags) check() ([]netip.Prefix, error) {
	allow, err := egress.ParseAllow(*f.allow)
	if err != nil {
		return nil, fmt.Errorf("-webhook-allow-nets (WEBHOOK_ALLOW_NETS): %w", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"-webhook-timeout (WEBHOOK_TIMEOUT)", *f.timeout}, {"-webhook-poll (WEBHOOK_POLL)", *f.poll},
		{"-webhook-retry-first (WEBHOOK_RETRY_FIRST)", *f.retryFirst}, {"-webhook-retry-longest (WEBHOOK_RETRY_LONGEST)", *f.retryLong},
		{"-webhook-retry-for (WEBHOOK_RETRY_FOR)", *f.retryFor}, {"-webhook-errors-every (WEBHOOK_ERRORS_EVERY)", *f.errorsEvery},
		{"-webhook-gaps-every (WEBHOOK_GAPS_EVERY)", *f.gapsEvery}} {
		if d.v <= 0 {
			return nil, fmt.Errorf("%s must be positive, got %v", d.name, d.v)
		}
	}
	if *f.workers < 1 || *f.perApp < 1 {
		return nil, fmt.Errorf("-webhook-workers (WEBHOOK_WORKERS) and -webhook-per-app (WEBHOOK_PER_APP) must be at least 1, got %d and %d", *f.workers, *f.perApp)
	}
	return allow, nil
}

// deliverer is the process's sender of webhook deliveries: Run does
// nothing with -webhook-send=false.
func (f webhookFlags) deliverer(store webhooks.Store, allow []netip.Prefix, reg prometheus.Registerer, log *slog.Logger) (*webhooks.Deliverer, func(context.Context)) {
	client := egress.New(egress.Options{Allow: allow, Timeout: *f.timeout})
	// A lease outlasts the longest attempt, so that another process takes
	// over a delivery only from one that stopped.
	d := webhooks.NewDeliverer(webhooks.Config{Workers: *f.workers, PerApp: *f.perApp, Poll: *f.poll, Lease: 2**f.timeout + 5*time.Second,
		Retry: webhooks.Retry{First: *f.retryFirst, Longest: *f.retryLong, For: *f.retryFor}}, store, client, log, reg)
	if !*f.send {
		log.Info("webhook deliveries are sent by other processes (WEBHOOK_SEND=false)")
		return d, func(context.Context) {}
	}
	return d, d.Run
}

// watcher watches the analytics for the errors.rate and gaps.opened
// webhooks; with -webhook-send=false it does not run either. Without
// ClickHouse, or without the gap inbox, its topic is not watched.
func (f webhookFlags) watcher(store webhookwatch.Store, errs webhookwatch.ErrorCounter, inboxes *gapinbox.Builder, told func(), log *slog.Logger) func(context.Context) {
	if !*f.send {
		return func(context.Context) {}
	}
	var in webhookwatch.Inboxes
	if inboxes != nil {
		in = inboxes
	}
	w := webhookwatch.New(webhookwatch.Config{ErrorsEvery: *f.errorsEvery, GapsEvery: *f.gapsEvery}, store, errs, in, told, log)
	return w.Run
}
