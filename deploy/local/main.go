// Command stack runs the product locally on one machine without Docker: the
// development Kafka-protocol broker, a private ClickHouse, the ingest
// service, the consumer, the content API and the gateway, each with its
// operator address, with the demo content and a ready-made token. On a
// fresh machine it first installs what the services need (ClickHouse,
// WordNet, the sentence encoder's model; as far as the user may without
// root). Ctrl-C stops everything it started.
//
//	go run ./deploy/local
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/assistantcms/cms/internal/localstack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", ".local", "directory for binaries, the content database and broker data")
	brokerPort := flag.Int("broker-port", 19092, "loopback port of the Kafka-protocol broker")
	ingestPort := flag.Int("ingest-port", 18081, "loopback port of the ingest service")
	consumerPort := flag.Int("consumer-port", 18082, "loopback port of the consumer's metrics and health endpoints")
	apiPort := flag.Int("api-port", 18080, "loopback port of the content API")
	gatewayPort := flag.Int("gateway-port", 18000, "loopback port of the gateway, the one address for clients")
	ingestOp := flag.Int("ingest-operator-port", 19081, "loopback port of ingest's operator endpoints (/metrics, /debug/pprof/)")
	consumerOp := flag.Int("consumer-operator-port", 19082, "loopback port of the consumer's operator endpoints (/metrics, /debug/pprof/)")
	apiOp := flag.Int("api-operator-port", 19080, "loopback port of the api's operator endpoints (/status, /analytics, /metrics, /debug/pprof/)")
	gatewayOp := flag.Int("gateway-operator-port", 19083, "loopback port of the gateway's operator endpoints (/metrics, /debug/pprof/)")
	demoContent := flag.String("content", "deploy/demo/content.yaml", "content bundle loaded into the content database at start")
	clickhousePort := flag.Int("clickhouse-port", 19000, "loopback port of ClickHouse's native protocol")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	log.Info("building and starting", "dir", *dir)
	st, err := localstack.Start(ctx, localstack.Options{
		Dir: *dir,
		Ports: localstack.Ports{Broker: *brokerPort, ClickHouse: *clickhousePort, Ingest: *ingestPort,
			Consumer: *consumerPort, API: *apiPort, Gateway: *gatewayPort,
			IngestOperator: *ingestOp, ConsumerOperator: *consumerOp, APIOperator: *apiOp, GatewayOperator: *gatewayOp},
		Content: *demoContent,
		Log:     func(name string) io.Writer { return prefixed(name) },
	})
	if err != nil {
		return err
	}
	defer st.Stop()
	base, apiBase, one := "http://"+st.Ingest, "http://"+st.API, "http://"+st.Gateway
	op := func(addr string) string { return "http://" + addr }

	fmt.Printf(`
Local stack is up. Clients use one address: %s
(PUT /cms/app/events and /cms/apps/events go to ingest, other /cms paths to the api).
Operator endpoints (/metrics, /debug/pprof/, /status, /analytics) answer only on the
operator addresses.
  broker      %s (Kafka protocol; data in %s)
  clickhouse  %s (native protocol; data in %s)
  status      %s/status   (live counters and charts in a browser)
  analytics   %s/analytics?app=demo-app
  ingest      %s   readiness %s/readyz   operator %s (metrics %s/metrics)
  consumer    readiness http://%s/readyz   operator %s (metrics %s/metrics)
  api         %s   readiness %s/readyz   operator %s (metrics %s/metrics)
  gateway     %s   readiness %s/readyz   operator %s (metrics %s/metrics)
  content db  %s (demo content from %s)

Tokens of app demo-app (organization demo-org):
  runtime token     %s
    reads content and sends events, nothing more: what a runtime, and a web page, may carry
  management token  %s
    also changes content (GraphQL mutations) and reads events back: keep it secret
  %s

Send events:
  curl -X PUT %s/cms/app/events -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s1","userId":"u1","selectedHandler":"LaunchRequest"}]}'

Send realistic conversations (live progress; Ctrl-C stops):
  go run ./dev/demo -token %s

Watch them arrive, stored or quarantined with their reasons (needs the management token):
  in a browser: %s/cms/app/events/live   (paste the token into the page)
  curl -N %s/cms/app/events/live -H 'Authorization: Bearer %s'

Read content:
  curl %s/cms/handler/OpeningHours -H 'Authorization: Bearer %s'
  curl %s/cms/app -H 'Authorization: Bearer %s'

Query events (docs/analytics.md has more):
  clickhouse-client --port %d -q 'SELECT event_time, name, session_id FROM events ORDER BY event_time DESC LIMIT 10'

Change content (needs the management token):
  curl %s/cms/graphql -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
    -d '{"query":"mutation { addIntent(intent: {intentId: \"Greeting\", utterancePatterns: [\"hello there\"]}) { intentId } }"}'

`, one, st.Broker, st.BrokerData, st.ClickHouse, st.ClickHouseDir, op(st.APIOperator), op(st.APIOperator),
		base, base, op(st.IngestOperator), op(st.IngestOperator), st.Consumer, op(st.ConsumerOperator), op(st.ConsumerOperator),
		apiBase, apiBase, op(st.APIOperator), op(st.APIOperator), one, one, op(st.GatewayOperator), op(st.GatewayOperator), st.DB, *demoContent, st.Token, st.ManagementToken, st.Warning, one, st.Token, st.Token, one, one, st.ManagementToken, one, st.Token, one, st.Token, *clickhousePort, one, st.ManagementToken)

	if st.Notice != "" {
		fmt.Printf("stack: %s\n\n", st.Notice)
	}
	fmt.Println("Press Ctrl-C to stop everything.")

	select {
	case <-ctx.Done():
		log.Info("stopping")
		if err := st.Shutdown(); err != nil {
			return err
		}
		log.Info("stopped everything")
		return nil
	case name := <-st.Exited():
		return fmt.Errorf("%s exited", name)
	}
}

// prefixed writes a child's output line by line under its name.
func prefixed(name string) *prefixWriter { return &prefixWriter{prefix: "[" + name + "] "} }

type prefixWriter struct {
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprint(os.Stderr, p.prefix+string(p.buf[:i+1]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
