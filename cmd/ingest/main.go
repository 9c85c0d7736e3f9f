// Command ingest serves PUT /cms/app/events and publishes accepted runtime
// events to Kafka; "ingest resubmit" sends quarantined events through the
// same rules again. Every setting is an environment variable with a flag of
// the same meaning; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/clientnet"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/edge/launch"
	"github.com/assistantcms/cms/pkg/envflag"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
	"github.com/assistantcms/cms/pkg/pipeline/kafka"
	"github.com/assistantcms/cms/pkg/tenancy/tenancydb"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

// run is the command: flags, the ingest service or the resubmit command.
func run(args []string) error {
	fs := envflag.New(flag.NewFlagSet("ingest", flag.ContinueOnError), nil)
	f := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	trustedProxies, err := clientnet.ParseTrusted(*f.trusted)
	if err != nil {
		return fmt.Errorf("-trusted-proxies (TRUSTED_PROXIES): %w", err)
	}
	settings, err := f.service.Start(os.Stderr)
	if errors.Is(err, launch.ErrVersionPrinted) {
		return nil
	}
	if err != nil {
		return err
	}
	log := settings.Log
	ctx, stop := launch.Signals(context.Background())
	defer stop()

	cfg, err := f.serviceConfig(settings, trustedProxies)
	if err != nil {
		return err
	}
	switch rest := fs.Args(); {
	case len(rest) > 0 && rest[0] == "resubmit":
		return resubmitCommand(ctx, rest[1:], cfg, log)
	case len(rest) > 0:
		return fmt.Errorf("unknown command %q; the only command is resubmit", strings.Join(rest, " "))
	}

	store, err := tenancydb.Open(ctx, *f.contentDB)
	if err != nil {
		return err
	}
	defer store.Close()
	svc, err := ingest.NewService(ctx, cfg, store, log)
	if err != nil {
		return err
	}
	return settings.Serve(ctx, svc.Serve)
}

// flags are ingest's settings, read once its flag set has been parsed.
type flags struct {
	service         *launch.Flags
	kafka           func() kafka.Settings
	contentDB       *string
	tokenTTL, grace *time.Duration
	admission       admissionFlags
	maxEvents       *int
	maxEventBytes   *int
	eventTypes      *string
	rateRPS         *float64
	rateBurst       *int
	authFailures    auth.FailureFlags
	linger          *time.Duration
	maxInFlight     *int
	compression     *string
	trusted         *string
}

// defineFlags defines every flag of ingest on fs.
func defineFlags(fs *envflag.Set) *flags {
	f := &flags{}
	f.service = launch.Define(fs, launch.Options{
		AddrEnv: "INGEST_ADDR", Addr: ":8081", AddrHelp: "HTTP listen address",
		ShutdownTimeout: 10 * time.Second, ShutdownHelp: "time allowed to drain requests on SIGTERM",
		CORS: true,
		HTTP: httpserve.Limits{ReadHeaderTimeout: ingest.DefaultReadHeaderTimeout, ReadTimeout: ingest.DefaultReadTimeout,
			IdleTimeout: ingest.DefaultIdleTimeout, MaxHeaderBytes: ingest.DefaultMaxHeaderBytes},
		WriteTimeoutRule: "the read timeout plus the produce timeout plus 5s",
		// The names these variables had before every service shared them.
		FormerEnv: map[string]string{launch.EnvReadHeaderTimeout: "READ_HEADER_TIMEOUT", launch.EnvReadTimeout: "READ_TIMEOUT",
			launch.EnvIdleTimeout: "IDLE_TIMEOUT"},
	})
	f.kafka = kafka.DefineFlags(fs, kafka.Producing)
	f.contentDB = fs.Secret("content-db", "CONTENT_DB", "cms.db", "content database holding apps and tokens: a SQLite file path or a postgres:// URL")
	f.tokenTTL = fs.Duration("token-cache-ttl", "TOKEN_CACHE_TTL", 10*time.Second, "how long token lookups are cached (at most 30s)")
	f.grace = fs.Duration("outage-grace", "CONTENT_OUTAGE_GRACE", auth.DefaultOutageGrace, "how long past the token cache TTL tokens looked up before are still accepted while the content database cannot be reached (negative: not at all)")
	f.maxEvents = fs.Int("max-events", "MAX_EVENTS", ingest.DefaultMaxEvents, "most events in one batch; more are answered 413 as soon as they are counted, before the batch is validated")
	f.maxEventBytes = fs.Int("max-event-bytes", "MAX_EVENT_BYTES", event.DefaultMaxEventBytes, "largest event in bytes, as sent (with appId filled in); larger ones are quarantined")
	f.eventTypes = fs.String("event-types", "EVENT_TYPES", "", "comma-separated event types admitted; others are quarantined (empty: any type)")
	f.admission = defineAdmissionFlags(fs)
	f.rateRPS = fs.Float64("rate-limit-rps", "RATE_LIMIT_RPS", 1000, "requests per second allowed per token (0 disables)")
	f.rateBurst = fs.Int("rate-limit-burst", "RATE_LIMIT_BURST", 2000, "burst of requests allowed per token")
	f.authFailures = auth.DefineFailureFlags(fs)
	fs.Alias("KAFKA_LINGER", "KAFKA_BATCH_TIMEOUT")
	f.linger = fs.Duration("kafka-linger", "KAFKA_LINGER", 0, "least time between two produce requests to one broker: records that come sooner wait for the rest of it and go together; a record that finds the broker idle for longer goes at once (0: always at once)")
	f.maxInFlight = fs.Int("kafka-max-in-flight", "KAFKA_MAX_IN_FLIGHT", kafka.DefaultMaxInFlight, "produce requests unanswered per broker at most; records arriving meanwhile share the next one")
	f.compression = fs.String("kafka-compression", "KAFKA_COMPRESSION", kafka.DefaultCompression, "none, gzip, snappy, lz4 or zstd")
	f.trusted = fs.String("trusted-proxies", "TRUSTED_PROXIES", clientnet.DefaultTrusted,
		"comma-separated networks (CIDR) or addresses of the proxies in front of ingest, whose X-Forwarded-For names the client whose network events record (empty: none, the connection's peer is the client)")
	return f
}

// serviceConfig is the service's configuration from the flags, checked.
func (f *flags) serviceConfig(settings launch.Settings, trustedProxies []netip.Prefix) (ingest.ServiceConfig, error) {
	ks := f.kafka()
	if err := ks.Check(); err != nil {
		return ingest.ServiceConfig{}, err
	}
	handler := f.admission.config()
	handler.TrustedProxies = trustedProxies
	cfg := ingest.ServiceConfig{
		Kafka:            ks.Cluster,
		EventsTopic:      ks.EventsTopic,
		QuarantineTopic:  ks.QuarantineTopic,
		TopicPartitions:  ks.TopicPartitions,
		TopicReplication: ks.TopicReplication,
		MaxMessageBytes:  ks.MaxMessageBytes,
		Producer:         kafka.ProducerConfig{Linger: *f.linger, MaxInFlight: *f.maxInFlight, Compression: *f.compression},
		Handler:          handler,
		Limits:           event.Limits{MaxEvents: *f.maxEvents, MaxEventBytes: *f.maxEventBytes, Types: envflag.List(*f.eventTypes)},
		TokenCacheTTL:    *f.tokenTTL,
		TokenOutageGrace: *f.grace,
		AuthFailureRate:  f.authFailures.Rate(),
		AuthFailureBurst: f.authFailures.Burst(),
		RateLimitRPS:     *f.rateRPS,
		RateLimitBurst:   *f.rateBurst,
		ShutdownTimeout:  settings.ShutdownTimeout,
		HTTP:             settings.HTTP,
		CORS:             settings.CORS,
	}
	cfg.TopicRetention, cfg.TopicMinInsyncReplicas = ks.TopicRetention, ks.TopicMinInsyncReplicas
	if err := cfg.Check(); err != nil {
		return ingest.ServiceConfig{}, err
	}
	return cfg, nil
}

// admissionFlags bound what requests may hold at once: bodies, request
// slots and memory, overall and per app, token and organization, and how
// slowly a body may arrive.
type admissionFlags struct {
	maxBody, maxDecompressed                                                       *int64
	produceTimeout                                                                 *time.Duration
	maxInFlight, maxInFlightPerApp, maxInFlightPerToken, maxInFlightPerOrg         *int
	maxBodyMemory, maxBodyMemoryPerApp, maxBodyMemoryPerToken, maxBodyMemoryPerOrg *int64
	minUploadRate                                                                  *int64
	minUploadGrace                                                                 *time.Duration
	eventRatePerToken, eventRatePerApp, eventRatePerOrg                            *float64
	eventBurstPerToken, eventBurstPerApp, eventBurstPerOrg                         *int
}

func defineAdmissionFlags(fs *envflag.Set) admissionFlags {
	return admissionFlags{
		maxBody:               fs.Int64("max-body-bytes", "MAX_BODY_BYTES", ingest.DefaultMaxBodyBytes, "largest request body on the wire"),
		maxDecompressed:       fs.Int64("max-decompressed-bytes", "MAX_DECOMPRESSED_BYTES", ingest.DefaultMaxDecompressedBytes, "largest gzip body once decompressed"),
		produceTimeout:        fs.Duration("produce-timeout", "PRODUCE_TIMEOUT", ingest.DefaultProduceTimeout, "longest wait for the broker's acknowledgement before answering 503"),
		maxInFlight:           fs.Int("max-in-flight", "MAX_IN_FLIGHT", ingest.DefaultMaxInFlight, "requests handled at once; more are answered 503"),
		maxInFlightPerApp:     fs.Int("max-in-flight-per-app", "MAX_IN_FLIGHT_PER_APP", 0, "requests of one app (sent with any of its tokens or its organization's) handled at once; more are answered 429 (0: a quarter of -max-in-flight)"),
		maxInFlightPerToken:   fs.Int("max-in-flight-per-token", "MAX_IN_FLIGHT_PER_TOKEN", 0, "requests of one token handled at once, which bounds an organization token over all its apps; more are answered 429 (0: -max-in-flight-per-app)"),
		maxInFlightPerOrg:     fs.Int("max-in-flight-per-org", "MAX_IN_FLIGHT_PER_ORG", 0, "requests of one organization (all its apps and tokens) handled at once; more are answered 429 (0: half of -max-in-flight, or an app's or a token's share if more)"),
		maxBodyMemory:         fs.Int64("max-body-memory", "MAX_BODY_MEMORY", ingest.DefaultMaxBodyMemory, "memory all requests' bodies and their records may hold at once (three bytes per body byte past the first 64 KiB of each, decompressed); more are answered 503"),
		maxBodyMemoryPerApp:   fs.Int64("max-body-memory-per-app", "MAX_BODY_MEMORY_PER_APP", 0, "what one app's requests may hold of -max-body-memory at once; more are answered 429 (0: a quarter of -max-body-memory, or what the largest body needs if that is more)"),
		maxBodyMemoryPerToken: fs.Int64("max-body-memory-per-token", "MAX_BODY_MEMORY_PER_TOKEN", 0, "what one token's requests may hold of -max-body-memory at once, over all the apps an organization token acts for; more are answered 429 (0: -max-body-memory-per-app)"),
		maxBodyMemoryPerOrg:   fs.Int64("max-body-memory-per-org", "MAX_BODY_MEMORY_PER_ORG", 0, "what one organization's requests (all its apps and tokens) may hold of -max-body-memory at once; more are answered 429 (0: half of -max-body-memory, or an app's or a token's share if more)"),
		minUploadRate:         fs.Int64("min-upload-rate", "MIN_UPLOAD_RATE", ingest.DefaultMinUploadRate, "bytes a second a request body must keep up after -min-upload-grace: a body has the grace plus a second for every this many bytes to arrive, else 408 (0: no minimum, the read timeout alone)"),
		minUploadGrace:        fs.Duration("min-upload-grace", "MIN_UPLOAD_GRACE", ingest.DefaultMinUploadGrace, "time every request body has before -min-upload-rate counts"),
		eventRatePerToken:     fs.Float64("event-rate-per-token", "EVENT_RATE_PER_TOKEN", ingest.DefaultEventRatePerToken, "events a second one token may send, whichever apps it acts for; a batch that would pass it is answered 429 with Retry-After and nothing of it stored (0: no limit)"),
		eventBurstPerToken:    fs.Int("event-burst-per-token", "EVENT_BURST_PER_TOKEN", 0, "burst of -event-rate-per-token; at least -max-events (0: twice -max-events)"),
		eventRatePerApp:       fs.Float64("event-rate-per-app", "EVENT_RATE_PER_APP", ingest.DefaultEventRatePerApp, "events a second one app may be sent, by any of its tokens or its organization's; more are answered 429 with Retry-After (0: no limit)"),
		eventBurstPerApp:      fs.Int("event-burst-per-app", "EVENT_BURST_PER_APP", 0, "burst of -event-rate-per-app; at least -max-events (0: twice -max-events)"),
		eventRatePerOrg:       fs.Float64("event-rate-per-org", "EVENT_RATE_PER_ORG", ingest.DefaultEventRatePerOrg, "events a second one organization's apps and tokens may send together; more are answered 429 with Retry-After (0: no limit)"),
		eventBurstPerOrg:      fs.Int("event-burst-per-org", "EVENT_BURST_PER_ORG", 0, "burst of -event-rate-per-org; at least -max-events (0: four times -max-events)"),
	}
}

// config is the handler's configuration from the flags.
func (f admissionFlags) config() ingest.Config {
	c := ingest.Config{
		MaxBodyBytes: *f.maxBody, MaxDecompressedBytes: *f.maxDecompressed,
		ProduceTimeout: *f.produceTimeout, MaxInFlight: *f.maxInFlight,
		MaxInFlightPerApp: *f.maxInFlightPerApp, MaxInFlightPerToken: *f.maxInFlightPerToken, MaxInFlightPerOrg: *f.maxInFlightPerOrg,
		MaxBodyMemory: *f.maxBodyMemory, MaxBodyMemoryPerApp: *f.maxBodyMemoryPerApp,
		MaxBodyMemoryPerToken: *f.maxBodyMemoryPerToken, MaxBodyMemoryPerOrg: *f.maxBodyMemoryPerOrg,
		MinUploadRate: *f.minUploadRate, MinUploadGrace: *f.minUploadGrace,
	}
	if *f.minUploadRate <= 0 {
		c.MinUploadRate = -1 // the Config's zero means its default
	}
	// The flags' zero rate is no limit, the Config's its default.
	for _, r := range []struct {
		flag *float64
		dst  *float64
	}{{f.eventRatePerToken, &c.EventRatePerToken}, {f.eventRatePerApp, &c.EventRatePerApp}, {f.eventRatePerOrg, &c.EventRatePerOrg}} {
		*r.dst = *r.flag
		if *r.flag <= 0 {
			*r.dst = -1
		}
	}
	c.EventBurstPerToken, c.EventBurstPerApp, c.EventBurstPerOrg = *f.eventBurstPerToken, *f.eventBurstPerApp, *f.eventBurstPerOrg
	return c
}
