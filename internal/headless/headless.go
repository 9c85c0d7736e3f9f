// Package headless runs Debian's Chromium without a display for tests
// that load pages: the status page, and pages of other origins calling
// the services. It is never used in production.
package headless

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/debpkg"
)

// Command returns Chromium, headless with a fresh profile, run with args.
// Without the background-networking flags it tries hosts this machine
// cannot reach. The test fails when Chromium is not installed.
func Command(ctx context.Context, t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := debpkg.Find("chromium")
	if err != nil {
		t.Fatalf("%v: go run ./dev/test installs it (Debian's chromium package)", err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile")}, args...)...)
	// Chromium starts helper processes that hold its output open: its own
	// process group is ended as a whole, and the wait for output bounded.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// DumpDOM loads u, gives its scripts budget of virtual time to fetch and
// draw, and returns the document as they left it.
func DumpDOM(ctx context.Context, t testing.TB, u string, budget time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := Command(ctx, t, "--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10), "--dump-dom", u)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}
