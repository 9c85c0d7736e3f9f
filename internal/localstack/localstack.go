// Package localstack runs the whole product on one machine without Docker:
// the development Kafka-protocol broker, a private ClickHouse, ingest, the
// consumer, the content API and the gateway, each as its own process on
// loopback ports, with demo content and a token. On a fresh machine it
// first installs what the services read (ClickHouse, WordNet, the sentence
// encoder's model; see installPrerequisites). The local stack command
// uses it, and so do the tests of the deployment files, which need every
// service running and exporting its metrics.
package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/devclickhouse"
)

// Ports are the loopback ports of the components; 0 picks a free one.
type Ports struct {
	Broker, ClickHouse, Ingest, Consumer, API, Gateway int
	// Operator ports serve each service's /metrics, profiles and, on
	// the api, /status and /analytics, which the main ports answer 404.
	IngestOperator, ConsumerOperator, APIOperator, GatewayOperator int
}

// Options configure Start.
type Options struct {
	// Dir holds the binaries, the content database and the servers' data.
	Dir   string
	Ports Ports
	// Content is a content bundle loaded at start; empty loads none.
	Content string
	// Env adds environment variables to a service, by name: "ingest",
	// "consumer", "api" or "gateway".
	Env map[string][]string
	// Log returns where a component's output goes; nil discards it.
	Log func(component string) io.Writer
	// ReadyTimeout bounds the wait for each service; 0 means 60s.
	ReadyTimeout time.Duration
	// ContentDB is the content database's DSN (a postgres:// URL, say);
	// empty makes a SQLite file in Dir.
	ContentDB string
}

// GatewaySourceAddr is the loopback address the gateway connects to
// ingest and the api from, and the one proxy they trust: every client of
// the stack is on this host, so trusting loopback would let any of them
// name its own network in X-Forwarded-For.
const GatewaySourceAddr = "127.0.0.2"

// TokenWarning says what the demo's runtime token lets anyone holding it
// do on this stack, whose suggestions need one source only.
const TokenWarning = "The local stack suggests HISTORICAL queries from one source (HISTORY_MIN_SOURCES=1): " +
	"anyone with the runtime token, which a web page carries, can plant a suggestion shown to every user. " +
	"Production keeps the default, 5 distinct client networks; never expose this stack with that setting."

// Stack is a running local stack. Addresses are host:port on loopback.
// Token is demo-app's runtime token (content:read, events:write: what a
// web page may carry); ManagementToken also writes content and reads
// events back.
type Stack struct {
	Dir, DB, Token, ManagementToken string
	// Notice says in one line what could not be installed without root
	// and how to install it; empty when nothing is missing.
	Notice string
	// Warning is TokenWarning, to print beside the tokens.
	Warning                        string
	Broker, ClickHouse             string
	Ingest, Consumer, API, Gateway string
	// Operator addresses, by service: where /metrics, /debug/pprof/
	// and the api's /status and /analytics answer.
	IngestOperator, ConsumerOperator, APIOperator, GatewayOperator string
	BrokerData, ClickHouseDir                                      string
	exited                                                         chan string

	// mu guards the components, which faults stop and start while
	// other goroutines read their process IDs.
	mu         sync.Mutex
	components []*component
}

// Components, in start order; Stop ends them in reverse.
const (
	BrokerName     = "broker"
	ClickHouseName = "clickhouse"
	IngestName     = "ingest"
	ConsumerName   = "consumer"
	APIName        = "api"
	GatewayName    = "gateway"
)

// component is one process of the stack and how to stop and start it.
type component struct {
	name  string
	start func(ctx context.Context) error
	// stop ends the process with sig and waits for it.
	stop func(sig syscall.Signal) error
	pid  func() int
}

// Exited receives the name of a service that ended before Stop.
func (s *Stack) Exited() <-chan string { return s.exited }

// Stop ends every component, each before what it uses.
func (s *Stack) Stop() { _ = s.Shutdown() }

// Shutdown is Stop, saying which components did not end cleanly.
func (s *Stack) Shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i := len(s.components) - 1; i >= 0; i-- {
		if err := s.components[i].stop(syscall.SIGTERM); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.components[i].name, err))
		}
	}
	s.components = nil
	return errors.Join(errs...)
}

func (s *Stack) find(name string) (*component, error) {
	for _, c := range s.components {
		if c.name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the local stack has no component %q", name)
}

// StopComponent ends one component with sig (SIGTERM to let it finish its
// work, SIGKILL as a crash would) and waits for it to exit.
func (s *Stack) StopComponent(name string, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(name)
	if err != nil {
		return err
	}
	return c.stop(sig)
}

// StartComponent starts a stopped component again, with the same ports,
// data and configuration, and waits until it is ready.
func (s *Stack) StartComponent(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(name)
	if err != nil {
		return err
	}
	if c.pid() != 0 {
		return fmt.Errorf("start %s: it is running", name)
	}
	return c.start(ctx)
}

// Signal sends sig to a running component without waiting, for faults
// such as SIGSTOP and SIGCONT.
func (s *Stack) Signal(name string, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(name)
	if err != nil {
		return err
	}
	pid := c.pid()
	if pid == 0 {
		return fmt.Errorf("signal %s: it is not running", name)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %s: %w", name, err)
	}
	return nil
}

// PIDs are the process IDs of the running components, by name.
func (s *Stack) PIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := make(map[string]int, len(s.components))
	for _, c := range s.components {
		if pid := c.pid(); pid != 0 {
			pids[c.name] = pid
		}
	}
	return pids
}

// Start builds the services, starts every component and returns once each
// is ready. On error it stops what it started.
func Start(ctx context.Context, o Options) (st *Stack, err error) {
	if o.Log == nil {
		o.Log = func(string) io.Writer { return io.Discard }
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("locate %s: %w", o.Dir, err)
	}
	s := &Stack{Dir: abs, DB: filepath.Join(abs, "cms.db"), exited: make(chan string, 4), Warning: TokenWarning,
		BrokerData: filepath.Join(abs, "kafka"), ClickHouseDir: filepath.Join(abs, "clickhouse")}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	notice, apiEnv, err := installPrerequisites(ctx, o.Log("install"), o.Env[APIName])
	if err != nil {
		return nil, err
	}
	s.Notice = notice
	bin := filepath.Join(abs, "bin")
	for _, dir := range []string{bin, s.ClickHouseDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := childproc.GoBuild(ctx, bin, "./cmd/ingest", "./cmd/api", "./cmd/consumer"); err != nil {
		return nil, fmt.Errorf("build the services: %w", err)
	}
	brokerBin, err := devbroker.Build(ctx, bin)
	if err != nil {
		return nil, err
	}
	broker, err := devbroker.Start(ctx, brokerBin, devbroker.Options{Port: o.Ports.Broker, DataDir: s.BrokerData, Log: o.Log("broker")})
	if err != nil {
		return nil, err
	}
	s.components = append(s.components, &component{name: BrokerName, start: broker.Start, pid: broker.PID,
		stop: func(sig syscall.Signal) error {
			if sig == syscall.SIGKILL {
				return broker.Kill()
			}
			return broker.Stop()
		}})
	s.Broker = broker.Addr()

	api := filepath.Join(bin, "api")
	if o.ContentDB != "" {
		s.DB = o.ContentDB
	}
	if o.Content != "" {
		if err := runAdmin(ctx, o.Log("api"), api, "-content-db", s.DB, "import", o.Content); err != nil {
			return nil, fmt.Errorf("load the content bundle: %w", err)
		}
	}
	var token, management bytes.Buffer
	if err := runAdmin(ctx, &token, api, "-content-db", s.DB, "demo", "--quiet", "--rotate"); err != nil {
		return nil, fmt.Errorf("create the demo app and its runtime token: %w", err)
	}
	if err := runAdmin(ctx, &management, api, "-content-db", s.DB, "demo", "--quiet", "--rotate", "--management"); err != nil {
		return nil, fmt.Errorf("create the demo app's management token: %w", err)
	}
	s.Token, s.ManagementToken = strings.TrimSpace(token.String()), strings.TrimSpace(management.String())

	ch, err := devclickhouse.Start(ctx, devclickhouse.Options{Dir: s.ClickHouseDir, TCPPort: o.Ports.ClickHouse, Log: o.Log("clickhouse")})
	if err != nil {
		return nil, err
	}
	s.components = append(s.components, &component{name: ClickHouseName, start: ch.Start, pid: ch.PID,
		stop: func(sig syscall.Signal) error {
			if sig == syscall.SIGKILL {
				return ch.Kill()
			}
			return ch.Stop()
		}})
	s.ClickHouse = ch.Addr()

	free, err := childproc.FreePorts(8)
	if err != nil {
		return nil, err
	}
	for i, p := range []*int{&o.Ports.Ingest, &o.Ports.Consumer, &o.Ports.API, &o.Ports.Gateway,
		&o.Ports.IngestOperator, &o.Ports.ConsumerOperator, &o.Ports.APIOperator, &o.Ports.GatewayOperator} {
		if *p == 0 {
			*p = free[i]
		}
	}
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	s.Ingest, s.Consumer, s.API, s.Gateway = addr(o.Ports.Ingest), addr(o.Ports.Consumer), addr(o.Ports.API), addr(o.Ports.Gateway)
	s.IngestOperator, s.ConsumerOperator = addr(o.Ports.IngestOperator), addr(o.Ports.ConsumerOperator)
	s.APIOperator, s.GatewayOperator = addr(o.Ports.APIOperator), addr(o.Ports.GatewayOperator)
	// The status page of the api charts every service's metrics, read
	// where they answer: the operator addresses.
	sources := "ingest=http://" + s.IngestOperator + "/metrics,consumer=http://" + s.ConsumerOperator + "/metrics,gateway=http://" + s.GatewayOperator + "/metrics"
	for _, svc := range []struct {
		name, bin, addr, operator string
		args, env                 []string
	}{
		// The gateway, connecting from an address of its own, is the one
		// proxy ingest and the api trust; every client of the stack is on
		// this host, one network, so the api suggests what enough users
		// asked from it (HISTORY_MIN_SOURCES=1; see TokenWarning).
		{IngestName, "ingest", s.Ingest, s.IngestOperator, nil, []string{"INGEST_ADDR=" + s.Ingest, "KAFKA_BROKERS=" + s.Broker, "CONTENT_DB=" + s.DB,
			"TRUSTED_PROXIES=" + GatewaySourceAddr}},
		{ConsumerName, "consumer", s.Consumer, s.ConsumerOperator, nil, []string{"CONSUMER_ADDR=" + s.Consumer, "KAFKA_BROKERS=" + s.Broker, "CLICKHOUSE_ADDR=" + s.ClickHouse}},
		{APIName, "api", s.API, s.APIOperator, []string{"serve"}, append([]string{"API_ADDR=" + s.API, "CONTENT_DB=" + s.DB, "CLICKHOUSE_ADDR=" + s.ClickHouse, "STATUS_SOURCES=" + sources,
			"HISTORY_MIN_SOURCES=1", "KAFKA_BROKERS=" + s.Broker, "TRUSTED_PROXIES=" + GatewaySourceAddr}, apiEnv...)},
		{GatewayName, "api", s.Gateway, s.GatewayOperator, []string{"gateway"}, []string{"GATEWAY_ADDR=" + s.Gateway, "INGEST_URL=http://" + s.Ingest, "API_URL=http://" + s.API,
			"GATEWAY_SOURCE_ADDR=" + GatewaySourceAddr}},
	} {
		svc.env = append(svc.env, "OPERATOR_ADDR="+svc.operator)
		sv := &service{stack: s, name: svc.name, readyURL: "http://" + svc.addr + "/readyz", timeout: o.ReadyTimeout, newCmd: func() *exec.Cmd {
			cmd := exec.Command(filepath.Join(bin, svc.bin), svc.args...)
			cmd.Env = append(append(os.Environ(), svc.env...), o.Env[svc.name]...)
			cmd.Stdout, cmd.Stderr = o.Log(svc.name), o.Log(svc.name)
			return cmd
		}}
		s.components = append(s.components, &component{name: svc.name, start: sv.start, stop: sv.stop, pid: sv.pid})
		if err := sv.start(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// runAdmin runs an api admin command, its output to out.
func runAdmin(ctx context.Context, out io.Writer, api string, args ...string) error {
	cmd := exec.CommandContext(ctx, api, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("api %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// service is one of the product's services, run in its own process group
// so that a Ctrl-C reaches only the parent, which then stops the services
// in order.
type service struct {
	stack    *Stack
	name     string
	readyURL string
	timeout  time.Duration
	newCmd   func() *exec.Cmd
	// proc and stopping belong to the current run; nil when stopped.
	proc     *childproc.Proc
	stopping chan struct{}
}

// start runs the service and waits until it is ready. An exit that stop
// did not cause is reported on the stack's Exited channel.
func (sv *service) start(ctx context.Context) error {
	proc, err := childproc.Start(sv.name, sv.newCmd())
	if err != nil {
		return err
	}
	stopping := make(chan struct{})
	sv.proc, sv.stopping = proc, stopping
	go func() {
		select {
		case <-proc.Done():
			select {
			case sv.stack.exited <- sv.name:
			default:
			}
		case <-stopping:
		}
	}()
	return waitReady(ctx, sv.name, sv.readyURL, proc.Done(), sv.timeout)
}

func (sv *service) stop(sig syscall.Signal) error {
	if sv.proc == nil {
		return nil
	}
	close(sv.stopping)
	err := sv.proc.Stop(sig, 20*time.Second)
	sv.proc, sv.stopping = nil, nil
	return err
}

func (sv *service) pid() int {
	if sv.proc == nil {
		return 0
	}
	return sv.proc.PID()
}

func waitReady(ctx context.Context, name, url string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url); err == nil {
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
	return fmt.Errorf("%s not ready after %v", name, timeout)
}
