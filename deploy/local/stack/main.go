// Command stack runs the product locally on one machine without Docker: the
// development Kafka-protocol broker and the ingest service, with a demo app
// and a ready-made token. Ctrl-C stops everything it started.
//
//	go run ./deploy/local/stack
package main

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/assistantcms/cms/pkg/devbroker"
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
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/ingest", "./cmd/api")
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
	var tokenOut bytes.Buffer
	demo := exec.CommandContext(ctx, filepath.Join(bin, "api"), "-content-db", db, "demo", "--quiet")
	demo.Stdout, demo.Stderr = &tokenOut, os.Stderr
	if err := demo.Run(); err != nil {
		return fmt.Errorf("create demo app and token: %w", err)
	}
	token := strings.TrimSpace(tokenOut.String())

	ingestAddr := fmt.Sprintf("127.0.0.1:%d", *ingestPort)
	ingest := exec.Command(filepath.Join(bin, "ingest"))
	ingest.Env = append(os.Environ(),
		"INGEST_ADDR="+ingestAddr, "KAFKA_BROKERS="+broker.Addr(), "CONTENT_DB="+db, "LOG_LEVEL=info")
	ingest.Stdout, ingest.Stderr = prefixed("ingest"), prefixed("ingest")
	// Ctrl-C reaches only this process, which stops ingest before the broker.
	ingest.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ingest.Start(); err != nil {
		return fmt.Errorf("start ingest: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ingest.Wait() }()
	defer func() {
		_ = ingest.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = ingest.Process.Kill()
		}
	}()
	base := "http://" + ingestAddr
	if err := waitReady(ctx, base+"/readyz", exited); err != nil {
		return err
	}

	fmt.Printf(`
Local stack is up.
  broker      %s (Kafka protocol; data in %s)
  ingest      %s   readiness %s/readyz   metrics %s/metrics
  content db  %s
  demo token  %s   (app demo-app of organization demo-org)

Send events:
  curl -X PUT %s/cms/app/events -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s1","userId":"u1","selectedHandler":"LaunchRequest"}]}'

Press Ctrl-C to stop everything.
`, broker.Addr(), filepath.Join(abs, "kafka"), base, base, base, db, token, base, token)

	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-exited:
		return fmt.Errorf("ingest exited: %v", err)
	}
}

func waitReady(ctx context.Context, url string, exited <-chan error) error {
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
		case err := <-exited:
			return fmt.Errorf("ingest exited before it was ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("ingest not ready after 60s")
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
