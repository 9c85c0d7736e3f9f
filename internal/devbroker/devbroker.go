// Package devbroker runs the development Kafka-protocol broker
// (dev/broker) as a child process, for integration tests, the
// local stack and benchmarks. It is never used in production.
package devbroker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
)

// Build compiles the broker into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	if err := childproc.GoBuild(ctx, dir, "./dev/broker"); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cms-dev-broker")
	if err := os.Rename(filepath.Join(dir, "broker"), bin); err != nil {
		return "", fmt.Errorf("name the broker binary: %w", err)
	}
	return bin, nil
}

// FreePort asks the kernel for a loopback port that is free right now.
func FreePort() (int, error) { return childproc.FreePort() }

// Broker is a running broker process.
type Broker struct {
	bin  string
	port int
	opts Options
	proc childproc.Slot
}

// Options configure Start.
type Options struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// DataDir keeps topics across Stop and Start; empty keeps nothing.
	DataDir string
	// Sync fsyncs every produced batch.
	Sync bool
	// Log receives the broker's stderr; nil discards it.
	Log io.Writer
	// TLSCertFile and TLSKeyFile make the broker speak TLS only, with
	// this PEM certificate and key (see internal/testcert).
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile makes the broker require client certificates
	// signed by the authorities of this PEM file, which must also have
	// signed TLSCertFile.
	TLSClientCAFile string
	// SASLUsers turn SASL authentication on: only these users get in.
	SASLUsers []SASLUser
}

// SASLUser is a user the broker admits, with the mechanism it must use.
type SASLUser struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism, Name, Password string
}

// Start runs the broker binary and waits until it listens.
func Start(ctx context.Context, bin string, o Options) (*Broker, error) {
	if o.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	b := &Broker{bin: bin, port: o.Port, opts: o}
	if err := b.Start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }

// PID of the running process, or 0.
func (b *Broker) PID() int { return b.proc.PID() }

// Start (re)starts a stopped broker on the same port and data directory.
func (b *Broker) Start(ctx context.Context) error {
	o := b.opts
	args := []string{"-port", strconv.Itoa(b.port)}
	if o.DataDir != "" {
		args = append(args, "-data-dir", o.DataDir)
	}
	if o.Sync {
		args = append(args, "-sync")
	}
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		args = append(args, "-tls-cert-file", o.TLSCertFile, "-tls-key-file", o.TLSKeyFile)
	}
	if o.TLSClientCAFile != "" {
		args = append(args, "-tls-client-ca-file", o.TLSClientCAFile)
	}
	for _, u := range o.SASLUsers {
		args = append(args, "-sasl-user", u.Mechanism+":"+u.Name+":"+u.Password)
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Stderr = o.Log
	// The broker prints its address once it listens.
	listening := &firstLine{seen: make(chan struct{})}
	cmd.Stdout = listening
	proc, err := childproc.Start("broker", cmd)
	if err != nil {
		return err
	}
	b.proc.Set(proc)
	select {
	case <-listening.seen:
		return nil
	case <-proc.Done():
		b.proc.Clear()
		return fmt.Errorf("start broker on port %d: it exited before it listened", b.port)
	case <-ctx.Done():
		_ = b.Kill()
		return fmt.Errorf("start broker: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		_ = b.Kill()
		return errors.New("start broker: not listening after 30s")
	}
}

// firstLine closes seen when the first complete line has been written.
type firstLine struct {
	once sync.Once
	seen chan struct{}
}

func (f *firstLine) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') >= 0 {
		f.once.Do(func() { close(f.seen) })
	}
	return len(p), nil
}

// Stop ends the broker with SIGTERM (it flushes its data directory) and
// waits for it; after 10 s it is killed.
func (b *Broker) Stop() error {
	return b.proc.Signal(syscall.SIGTERM, 10*time.Second)
}

// Kill ends the broker with SIGKILL, as a crash would.
func (b *Broker) Kill() error {
	return b.proc.Signal(syscall.SIGKILL, 10*time.Second)
}

// RunTests builds the broker into a temporary directory, stores its path
// in *bin, runs the package's tests and removes the directory. A test
// package's TestMain is os.Exit(devbroker.RunTests(m, &brokerBin)).
func RunTests(m interface{ Run() int }, bin *string) int {
	b, cleanup, err := BuildTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	*bin = b
	return m.Run()
}

// StartForTest starts the broker built at bin on a new data directory and
// stops it when the test ends.
func StartForTest(t testing.TB, bin string) *Broker {
	t.Helper()
	b, err := Start(context.Background(), bin, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b
}

// BuildTemp builds the broker into a new temporary directory, for a test
// package's TestMain; cleanup removes the directory.
func BuildTemp() (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "cms-broker-*")
	if err != nil {
		return "", nil, fmt.Errorf("create directory for the broker: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err = Build(ctx, dir)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}
