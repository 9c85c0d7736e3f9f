// Package devdocker starts a private Docker engine for the container tests
// (Debian's docker.io, run by hand without systemd) and builds the Docker
// Compose CLI plugin they drive it with.
//
// The engine has its own socket, exec root and pid file, and touches
// nothing of the host's network configuration: no default bridge, no
// iptables rules, no IP forwarding. Containers reach each other on the
// networks compose creates and publish ports on loopback through Docker's
// userland proxy; builds use the host's network. Its data root, which
// holds the images and the build cache, is kept between runs (a lock
// allows one engine on it at a time).
package devdocker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
)

// Debian's docker.io: the engine and the client whose built-in BuildKit
// builds without buildx.
const (
	Dockerd = "/usr/sbin/dockerd"
	Client  = "/usr/bin/docker"
)

// Engine is a running private Docker engine.
type Engine struct {
	// Host is the DOCKER_HOST of the engine.
	Host string
	// Config is a DOCKER_CONFIG directory holding the Compose plugin.
	Config string

	proc    childproc.Slot
	dir     string
	lock    *os.File
	stopped bool
}

// Options says where the engine keeps its state.
type Options struct {
	// DataRoot keeps images and the build cache between runs.
	DataRoot string
	// Dir holds the socket and exec root of this run; it is emptied at
	// start, so what a killed run left there goes, and removed at stop.
	// Its path must be short: it holds unix sockets.
	Dir string
	// Log receives the engine's output.
	Log io.Writer
}

// Start starts the engine and waits until it answers.
func Start(ctx context.Context, o Options) (_ *Engine, err error) {
	if err := os.MkdirAll(o.DataRoot, 0o700); err != nil {
		return nil, fmt.Errorf("create the engine's data root: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(o.DataRoot, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the data root's lock: %w", err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	// Another test's engine on the same data root would corrupt it: wait
	// for it to finish rather than fail.
	if err := flock(ctx, lock); err != nil {
		return nil, err
	}
	// An engine of a run that was killed outlives it and would share the
	// data root with this one.
	pidFile := filepath.Join(o.DataRoot, "dockerd.pid")
	if err := stopStale(pidFile, o.DataRoot); err != nil {
		return nil, err
	}
	if err := unmountUnder(o.Dir); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, fmt.Errorf("clear the engine's run directory: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the engine's run directory: %w", err)
	}
	e := &Engine{lock: lock, dir: o.Dir}
	sock := filepath.Join(o.Dir, "docker.sock")
	e.Host = "unix://" + sock
	cmd := exec.Command(Dockerd,
		"--data-root", filepath.Join(o.DataRoot, "root"),
		"--exec-root", filepath.Join(o.Dir, "x"),
		"--host", e.Host,
		"--pidfile", pidFile,
		// Without systemd, cgroups are managed by hand.
		"--exec-opt", "native.cgroupdriver=cgroupfs",
		// No process here may raise its hard limit above the host's.
		"--default-ulimit", "nofile=20000:20000",
		"--bridge", "none", "--iptables=false", "--ip-forward=false", "--ip-masq=false",
	)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	ping := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered /_ping with %d", sock, res.StatusCode)
		}
		return nil
	}
	if err := e.proc.Launch(ctx, "dockerd", cmd, time.Minute, ping); err != nil {
		return nil, err
	}
	return e, nil
}

// stopStale kills the engine whose pid the data root records, if that
// process is still a dockerd of this data root.
func stopStale(pidFile, dataRoot string) error {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the engine's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return os.Remove(pidFile)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), "dockerd") || !strings.Contains(string(cmdline), dataRoot) {
		return os.Remove(pidFile)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("find the stale engine %d: %w", pid, err)
	}
	_ = p.Signal(syscall.SIGTERM)
	for range 600 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = p.Kill()
	return nil
}

func flock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("another engine holds %s: %w", f.Name(), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Stop stops the engine (it stops what containers still run) and removes
// its run directory.
func (e *Engine) Stop() error {
	if e.stopped {
		return nil
	}
	e.stopped = true
	err := e.proc.Signal(syscall.SIGTERM, time.Minute)
	// A container on the host's network leaves the engine's handle on
	// that namespace mounted in the run directory after it stops.
	err = errors.Join(err, unmountUnder(e.dir))
	if rmErr := os.RemoveAll(e.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove the engine's run directory: %w", rmErr))
	}
	return errors.Join(err, e.lock.Close())
}

// Command is the Docker client against this engine, with the Compose
// plugin.
func (e *Engine) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Client, args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+e.Host, "DOCKER_BUILDKIT=1")
	if e.Config != "" {
		cmd.Env = append(cmd.Env, "DOCKER_CONFIG="+e.Config)
	}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Run runs the client and returns its standard output, or an error with
// everything it printed.
func (e *Engine) Run(ctx context.Context, args ...string) (string, error) {
	return Output(e.Command(ctx, args...))
}

// Output runs a client command made by Command (with more of its own
// environment, say) and returns its standard output, or an error naming
// the command with everything it printed.
func Output(cmd *exec.Cmd) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w\n%s%s", strings.Join(cmd.Args[1:], " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// unmountUnder detaches every mount below dir (the engine's namespace
// handles), in the reverse of their order in the mount table, so that
// dir can be removed.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return fmt.Errorf("read the mounts: %w", err)
	}
	// The table names mounts by real paths, with spaces and the like
	// escaped in octal.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	prefix := strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(filepath.Clean(dir)) + string(filepath.Separator)
	var points []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], prefix) {
			points = append(points, f[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		point, err := strconv.Unquote(`"` + strings.ReplaceAll(points[i], `"`, `\"`) + `"`)
		if err != nil {
			point = points[i]
		}
		if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("unmount %s: %w", points[i], err)
		}
	}
	return nil
}
