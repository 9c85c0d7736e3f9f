// Package childproc runs the child processes of the development tools (the
// local broker, a private ClickHouse, the services of the local stack) and
// stops them: each in its own process group, so that a Ctrl-C meant for
// the parent reaches only the parent, which then stops them in order.
package childproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a started child process.
type Proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts cmd; name is used in errors. cmd must not use StdoutPipe or
// StderrPipe: the process is waited for at once.
func Start(name string, cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// PID is the process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop sends sig and waits for the exit; after wait the process is killed
// and Stop reports that it did not stop in time.
func (p *Proc) Stop(sig syscall.Signal, wait time.Duration) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s; killed", p.name, wait)
	}
}

// Slot holds the process of a server that is stopped and started again
// over its life, as tests restart a server or kill it as a crash would.
// The zero Slot holds none.
type Slot struct{ proc *Proc }

// Set records the process just started.
func (s *Slot) Set(p *Proc) { s.proc = p }

// Clear forgets a process that has exited on its own.
func (s *Slot) Clear() { s.proc = nil }

// Running reports whether the slot holds a process.
func (s *Slot) Running() bool { return s.proc != nil }

// PID of the process held, or 0.
func (s *Slot) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Signal stops the process held with sig, as Proc.Stop does, and empties
// the slot. An empty slot has nothing to stop.
func (s *Slot) Signal(sig syscall.Signal, wait time.Duration) error {
	if s.proc == nil {
		return nil
	}
	defer s.Clear()
	return s.proc.Stop(sig, wait)
}

// ErrExited marks a Launch whose process ended before it was ready.
var ErrExited = errors.New("exited during start-up")

// Launch starts cmd into the slot and polls ready every 100 ms until it
// succeeds. A process that exits first gives an error wrapping ErrExited
// and ready's last error; one not ready within limit, or when ctx ends,
// is killed.
func (s *Slot) Launch(ctx context.Context, name string, cmd *exec.Cmd, limit time.Duration, ready func(context.Context) error) error {
	proc, err := Start(name, cmd)
	if err != nil {
		return err
	}
	s.Set(proc)
	deadline := time.Now().Add(limit)
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			s.Clear()
			return fmt.Errorf("%s %w: %w", name, ErrExited, err)
		case <-ctx.Done():
			_ = s.Signal(syscall.SIGKILL, 10*time.Second)
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Signal(syscall.SIGKILL, 10*time.Second)
			return fmt.Errorf("%s not ready after %s: %w", name, limit, err)
		}
	}
}

// FreePorts returns n distinct loopback ports that are free right now.
// Each is held until all are chosen: ports asked for one at a time may
// come back twice, and two servers of one test told the same port leave
// the second's clients talking to the first.
//
// They are drawn below the kernel's range of ephemeral ports, which
// outgoing connections take their local ports from: a port the kernel
// handed out as free (":0") can be taken by any client's connection before
// the server told to listen on it starts, which busy test runs saw
// ("Address already in use").
func FreePorts(n int) ([]int, error) {
	low, high := listenRange()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if high > low && tries < 50*n {
			addr = "127.0.0.1:" + strconv.Itoa(low+rand.IntN(high-low))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: draw another
			}
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort returns a loopback port that is free right now, as FreePorts
// chooses them.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// listenRange is where FreePorts draws from: from 20000 up to the first
// ephemeral port (Linux's ip_local_port_range), or nothing to draw from
// (low == high) where that range starts lower or cannot be read.
func listenRange() (low, high int) {
	const floor = 20000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return floor, floor
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return floor, floor
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil || first <= floor+1000 {
		return floor, floor
	}
	return floor, first
}

// GoBuild compiles the module's packages (paths relative to the module
// root, such as "./cmd/ingest") into dir, from wherever the caller runs:
// tests run in their package's directory.
func GoBuild(ctx context.Context, dir string, pkgs ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// ModuleRoot finds the directory holding go.mod, from this source file.
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate module root: no caller information")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("locate module root: no go.mod above " + file)
		}
		dir = parent
	}
}

// Output collects what processes and the goroutines around them write,
// safely from several at once, for a test to read back.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// FreeAddr returns a loopback address whose port is free right now, as
// FreePorts chooses them.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// WaitOK waits until a GET of url answers 200, for at most limit.
func WaitOK(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", url, err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not answering 200 within %v", url, limit)
}
