// Command stack runs the product locally on one machine without Docker: the
// development Kafka-protocol broker, a private ClickHouse, the ingest
// service, the consumer and the content API, with the demo content and a
// ready-made token. Ctrl-C
// stops everything it started.
//
//	go run ./deploy/local/stack
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/pkg/childproc"
	"github.com/assistantcms/cms/pkg/devbroker"
	"github.com/assistantcms/cms/pkg/devclickhouse"
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
	demoContent := flag.String("content", "deploy/demo/content.yaml", "content bundle loaded into the content database at start")
	clickhousePort := flag.Int("clickhouse-port", 19000, "loopback port of ClickHouse's native protocol")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	bin := filepath.Join(abs, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", bin, err)
	}
	log.Info("building binaries", "dir", bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/ingest", "./cmd/api", "./cmd/consumer")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build services: %w", err)
	}
	brokerBin, err := devbroker.Build(ctx, bin)
	if err != nil {
		return err
	}

	broker, err := devbroker.Start(ctx, brokerBin, devbroker.Options{
		Port: *brokerPort, DataDir: filepath.Join(abs, "kafka"), Log: prefixed("broker"),
	})
	if err != nil {
		return err
	}
	defer broker.Stop()
	log.Info("broker ready", "addr", broker.Addr())

	db := filepath.Join(abs, "cms.db")
	if *demoContent != "" {
		load := exec.CommandContext(ctx, filepath.Join(bin, "api"), "-content-db", db, "import", *demoContent)
		load.Stdout, load.Stderr = os.Stderr, os.Stderr
		if err := load.Run(); err != nil {
			return fmt.Errorf("load the demo content: %w", err)
		}
	}
	var tokenOut bytes.Buffer
	demo := exec.CommandContext(ctx, filepath.Join(bin, "api"), "-content-db", db, "demo", "--quiet")
	demo.Stdout, demo.Stderr = &tokenOut, os.Stderr
	if err := demo.Run(); err != nil {
		return fmt.Errorf("create demo app and token: %w", err)
	}
	token := strings.TrimSpace(tokenOut.String())

	if err := devclickhouse.Install(ctx, os.Stderr); err != nil {
		return fmt.Errorf("install ClickHouse: %w", err)
	}
	chDir := filepath.Join(abs, "clickhouse")
	if err := os.MkdirAll(chDir, 0o755); err != nil {
		return err
	}
	ch, err := devclickhouse.Start(ctx, devclickhouse.Options{Dir: chDir, TCPPort: *clickhousePort, Log: prefixed("clickhouse")})
	if err != nil {
		return err
	}
	defer ch.Stop()
	log.Info("clickhouse ready", "addr", ch.Addr())

	// Services stop in reverse order of start, each before what it uses.
	ingestAddr := fmt.Sprintf("127.0.0.1:%d", *ingestPort)
	consumerAddr := fmt.Sprintf("127.0.0.1:%d", *consumerPort)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", *apiPort)
	gatewayAddr := fmt.Sprintf("127.0.0.1:%d", *gatewayPort)
	exited := make(chan string, 4)
	for _, svc := range []struct {
		name, addr string
		args, env  []string
	}{
		{"ingest", ingestAddr, nil, []string{"INGEST_ADDR=" + ingestAddr, "KAFKA_BROKERS=" + broker.Addr(), "CONTENT_DB=" + db}},
		{"consumer", consumerAddr, nil, []string{"CONSUMER_ADDR=" + consumerAddr, "KAFKA_BROKERS=" + broker.Addr(), "CLICKHOUSE_ADDR=" + ch.Addr()}},
		{"api", apiAddr, []string{"serve"}, []string{"API_ADDR=" + apiAddr, "CONTENT_DB=" + db, "CLICKHOUSE_ADDR=" + ch.Addr()}},
		{"gateway", gatewayAddr, []string{"gateway"}, []string{"GATEWAY_ADDR=" + gatewayAddr, "INGEST_URL=http://" + ingestAddr, "API_URL=http://" + apiAddr}},
	} {
		binName := svc.name
		if svc.name == "gateway" {
			binName = "api" // "api gateway"
		}
		stop, err := startService(ctx, svc.name, filepath.Join(bin, binName), svc.args, svc.env, "http://"+svc.addr+"/readyz", exited)
		if err != nil {
			return err
		}
		defer stop()
	}
	base, apiBase, one := "http://"+ingestAddr, "http://"+apiAddr, "http://"+gatewayAddr

	fmt.Printf(`
Local stack is up. Clients use one address: %s
(PUT /cms/app/events and /cms/apps/events go to ingest, everything else to the api).
  broker      %s (Kafka protocol; data in %s)
  clickhouse  %s (native protocol; data in %s)
  ingest      %s   readiness %s/readyz   metrics %s/metrics
  consumer    readiness http://%s/readyz   metrics http://%s/metrics
  api         %s   readiness %s/readyz   metrics %s/metrics
  gateway     %s   readiness %s/readyz   metrics %s/metrics
  content db  %s (demo content from %s)
  demo token  %s   (app demo-app of organization demo-org)

Send events:
  curl -X PUT %s/cms/app/events -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s1","userId":"u1","selectedHandler":"LaunchRequest"}]}'

Send realistic conversations (live progress; Ctrl-C stops):
  go run ./deploy/local/demo -token %s

Read content:
  curl %s/cms/handler/OpeningHours -H 'Authorization: Bearer %s'
  curl %s/cms/app -H 'Authorization: Bearer %s'

Query events (docs/analytics.md has more):
  clickhouse-client --port %d -q 'SELECT event_time, name, session_id FROM events ORDER BY event_time DESC LIMIT 10'

Press Ctrl-C to stop everything.
`, one, broker.Addr(), filepath.Join(abs, "kafka"), ch.Addr(), chDir, base, base, base, consumerAddr, consumerAddr,
		apiBase, apiBase, apiBase, one, one, one, db, *demoContent, token, one, token, token, one, token, one, token, *clickhousePort)

	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case name := <-exited:
		return fmt.Errorf("%s exited", name)
	}
}

// startService runs one of the project's binaries (in its own process
// group, so Ctrl-C reaches only this process, which stops the services in
// order) and waits until it is ready. stop ends it with SIGTERM.
func startService(ctx context.Context, name, bin string, args, env []string, readyURL string, exited chan<- string) (stop func(), err error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = prefixed(name), prefixed(name)
	proc, err := childproc.Start(name, cmd)
	if err != nil {
		return nil, err
	}
	go func() {
		<-proc.Done()
		select {
		case exited <- name:
		default:
		}
	}()
	stop = func() { _ = proc.Stop(syscall.SIGTERM, 20*time.Second) }
	if err := waitReady(ctx, name, readyURL, proc.Done()); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func waitReady(ctx context.Context, name, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready", name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after 60s", name)
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
