package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/content/contentapi"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/pipeline/livetail"
	"github.com/assistantcms/cms/pkg/pipeline/livetail/livehttp"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// liveFlags are the settings of the live view of events: the Kafka it
// reads and what its watchers may cost.
type liveFlags struct {
	kafka                                func() kafka.TailSettings
	maxWatchers, perApp, perOrg, payload *int
	reads                                *int
	rate                                 *float64
	summary, heartbeat                   *time.Duration
}

func defineLiveFlags(fs *envflag.Set) liveFlags {
	return liveFlags{
		kafka:       kafka.DefineTailFlags(fs),
		maxWatchers: fs.Int("live-max-watchers", "LIVE_MAX_WATCHERS", livetail.DefaultMaxWatchers, "most streams of "+livehttp.Path+" this process serves at once"),
		perApp:      fs.Int("live-max-watchers-per-app", "LIVE_MAX_WATCHERS_PER_APP", livetail.DefaultMaxWatchersPerApp, "most streams of one app's events at once"),
		perOrg:      fs.Int("live-max-watchers-per-org", "LIVE_MAX_WATCHERS_PER_ORG", 0, "most streams of the apps of one organization at once (0: half of -live-max-watchers)"),
		rate:        fs.Float64("live-events-per-second", "LIVE_EVENTS_PER_SECOND", livetail.DefaultEventsPerSecond, "most events one stream is sent a second (a burst of as many at once); the others are counted in its summaries"),
		payload:     fs.Int("live-payload-bytes", "LIVE_PAYLOAD_BYTES", livetail.DefaultPayloadBytes, "longest payload a stream shows, in bytes of JSON; a longer one is cut"),
		reads:       fs.Int("live-read-per-second", "LIVE_READ_PER_SECOND", livetail.DefaultReadPerSecond, "most records of both topics the live view reads a second; above, it shows a sample and tells streams how many it passed over (0: every record)"),
		summary:     fs.Duration("live-summary-interval", "LIVE_SUMMARY_INTERVAL", livehttp.DefaultSummary, "how often a stream tells what it was and was not sent"),
		heartbeat:   fs.Duration("live-heartbeat-interval", "LIVE_HEARTBEAT_INTERVAL", livehttp.DefaultHeartbeat, "longest silence of a stream before a comment line keeps proxies from closing it"),
	}
}

// check refuses settings that cannot work.
func (f liveFlags) check() error {
	for _, l := range []struct {
		flag, env string
		v         int
	}{
		{"live-max-watchers", "LIVE_MAX_WATCHERS", *f.maxWatchers},
		{"live-max-watchers-per-app", "LIVE_MAX_WATCHERS_PER_APP", *f.perApp},
		{"live-payload-bytes", "LIVE_PAYLOAD_BYTES", *f.payload},
	} {
		if l.v < 1 {
			return fmt.Errorf("serve: -%s (%s) %d: want 1 or more", l.flag, l.env, l.v)
		}
	}
	if *f.reads < 0 {
		return fmt.Errorf("serve: -live-read-per-second (LIVE_READ_PER_SECOND) %d: want 0 (every record) or more", *f.reads)
	}
	if *f.perOrg < 0 {
		return fmt.Errorf("serve: -live-max-watchers-per-org (LIVE_MAX_WATCHERS_PER_ORG) %d: want 1 or more (0: half of -live-max-watchers)", *f.perOrg)
	}
	if *f.rate <= 0 {
		return fmt.Errorf("serve: -live-events-per-second (LIVE_EVENTS_PER_SECOND) %v: want more than 0", *f.rate)
	}
	for _, d := range []struct {
		flag, env string
		v         time.Duration
	}{
		{"live-summary-interval", "LIVE_SUMMARY_INTERVAL", *f.summary},
		{"live-heartbeat-interval", "LIVE_HEARTBEAT_INTERVAL", *f.heartbeat},
	} {
		if d.v <= 0 {
			return fmt.Errorf("serve: -%s (%s) %s: want more than 0", d.flag, d.env, d.v)
		}
	}
	if s := f.kafka(); s.Enabled() {
		if err := s.Check(); err != nil {
			return fmt.Errorf("serve: the live view's Kafka: %w", err)
		}
	}
	return nil
}

// liveView is the live view of events as the api serves it: the hub
// (nil without Kafka, when the stream answers 503), the route and the
// page's files.
type liveView struct {
	hub   *livetail.Hub
	route contentapi.AuthorizedRoute
	pages []contentapi.Page
}

func (f liveFlags) build(reg prometheus.Registerer, log *slog.Logger) (liveView, error) {
	s := f.kafka()
	var hub *livetail.Hub
	if s.Enabled() {
		tail, err := s.Cluster.NewTail(kafka.TailConfig{Topics: []string{s.EventsTopic, s.QuarantineTopic}, MaxMessageBytes: s.MaxMessageBytes,
			MaxRecordsPerSecond: *f.reads})
		if err != nil {
			return liveView{}, fmt.Errorf("serve: the live view's Kafka: %w", err)
		}
		hub = livetail.NewHub(livetail.Config{EventsTopic: s.EventsTopic, QuarantineTopic: s.QuarantineTopic,
			MaxWatchers: *f.maxWatchers, MaxWatchersPerApp: *f.perApp, MaxWatchersPerOrg: *f.perOrg,
			EventsPerSecond: *f.rate, PayloadBytes: *f.payload}, tail, reg, log)
		log.Info("live view of events reads Kafka", "brokers", s.Cluster.Brokers, "topics", []string{s.EventsTopic, s.QuarantineTopic})
	} else {
		log.Info("no Kafka configured (KAFKA_BROKERS): " + livehttp.Path + " answers 503")
	}
	h := livehttp.New(hub, livehttp.Config{Summary: *f.summary, Heartbeat: *f.heartbeat}, reg, log)
	page := livehttp.Page()
	return liveView{
		hub: hub,
		route: contentapi.AuthorizedRoute{Path: livehttp.Path, Scope: tenancy.EventsRead, Need: "watching events",
			Serve: h.Stream, Page: page, WantsPage: httpserve.WantsPage},
		pages: []contentapi.Page{{Path: livehttp.ScriptPath, Handler: page}, {Path: livehttp.StylePath, Handler: page}},
	}, nil
}
