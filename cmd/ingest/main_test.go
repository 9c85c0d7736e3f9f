package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/sqlite"
	"github.com/assistantcms/cms/pkg/devbroker"
)

// TestBinaryServesAndStopsOnSIGTERM runs the built binary configured only
// through environment variables, against the broker process, and checks
// that SIGTERM ends it cleanly within the shutdown timeout.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "ingest")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	brokerBin, err := devbroker.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	broker, err := devbroker.Start(ctx, brokerBin, devbroker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Stop()

	db := filepath.Join(dir, "cms.db")
	store, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, id, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		store.CreateOrganization(ctx, content.Organization{ID: "o", Name: "o", CreatedAt: now}),
		store.CreateApp(ctx, content.App{ID: "a", OrganizationID: "o", Name: "a", CreatedAt: now, UpdatedAt: now}),
		store.CreateToken(ctx, content.Token{ID: id, Hash: auth.HashToken(tok), OrganizationID: "o", AppID: "a", CreatedAt: now}),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	store.Close()

	port, err := devbroker.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "INGEST_ADDR="+addr, "KAFKA_BROKERS="+broker.Addr(), "CONTENT_DB="+db,
		"EVENTS_TOPIC=bin-events", "QUARANTINE_TOPIC=bin-quarantine", "TOPIC_PARTITIONS=2", "SHUTDOWN_TIMEOUT=10s")
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("ingest exited before it was ready: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	req, _ := http.NewRequest(http.MethodPut, base+"/cms/app/events", strings.NewReader(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":"s"}]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"accepted":1`) {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	metrics, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(mb), `cms_ingest_events_total{outcome="accepted"} 1`) {
		t.Errorf("metrics do not count the accepted event")
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", logs.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	if !strings.Contains(logs.String(), `"msg":"ingest stopped"`) {
		t.Errorf("no clean-stop log line:\n%s", logs.String())
	}
}

func TestBadConfigurationFails(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"bad log level", []string{"-log-level", "loud"}, "", "log level"},
		{"bad duration env", nil, "PRODUCE_TIMEOUT=soon", "PRODUCE_TIMEOUT"},
		{"unknown flag", []string{"-nope"}, "", "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				k, v, _ := strings.Cut(tc.env, "=")
				t.Setenv(k, v)
			}
			err := run(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%v) = %v, want an error about %q", tc.args, err, tc.want)
			}
		})
	}
}
