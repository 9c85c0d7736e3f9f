// Package containers_test builds the image of deploy/compose/Dockerfile and
// runs deploy/compose's deployments with Docker Compose on a private Docker
// engine, then probes them as a user would: through the published gateway
// with the reference client's runtime, on the operator port, and through
// Prometheus.
//
// What no registry serves here is replaced by stand-ins built from Debian's
// packages (testdata/standins/build-images); compose.standins.yaml swaps
// only those images. The engine, its images and the Compose plugin are
// kept in the user's cache directory between runs.
package containers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/devdocker"
)

const (
	repoRoot = "../.."
	// image is compose.yaml's default CMS_IMAGE.
	image = "assistantcms/cms:local"
)

// engine is the Docker engine every test of the package uses, started by
// TestMain.
var engine *devdocker.Engine

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cache, err := os.UserCacheDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "containers:", err)
		return 1
	}
	cache = filepath.Join(cache, "cms-containers")
	// A short path, since the engine's exec root holds unix sockets, and
	// a fixed one, so that a killed run's is cleared by the next.
	dir := filepath.Join(os.TempDir(), "cms-dockerd-"+strconv.Itoa(os.Getuid()))
	logs := &childproc.Output{}
	engine, err = devdocker.Start(ctx, devdocker.Options{DataRoot: filepath.Join(cache, "engine"), Dir: dir, Log: logs})
	if err != nil {
		fmt.Fprintf(os.Stderr, "containers: start the Docker engine: %v\n%s", err, tail(logs.String(), 4000))
		return 1
	}
	code := 1
	defer func() {
		if err := engine.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "containers: stop the Docker engine:", err)
			code = 1
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "dockerd's log:\n%s\n", tail(logs.String(), 6000))
		}
	}()
	if err := prepare(ctx, cache); err != nil {
		fmt.Fprintln(os.Stderr, "containers:", err)
		return code
	}
	code = m.Run()
	return code
}

// prepare clears what a killed run left, installs Compose and builds the
// stand-ins and our image.
func prepare(ctx context.Context, cache string) error {
	if err := clearEngine(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := engine.InstallCompose(ctx, filepath.Join(cache, "docker")); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "containers: Docker Compose %s ready in %v\n", devdocker.ComposeVersion, time.Since(start).Round(time.Second))
	start = time.Now()
	build := exec.CommandContext(ctx, "testdata/standins/build-images", filepath.Join(cache, "standins"))
	build.Env = append(os.Environ(), "DOCKER="+devdocker.Client, "DOCKER_HOST="+engine.Host)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the stand-in images: %w\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "containers: stand-in images ready in %v\n", time.Since(start).Round(time.Second))
	// The image exactly as a user builds it (compose.yaml's build: the
	// repository root as context), with BuildKit; the build stage fetches
	// modules, WordNet and the encoder's model over the host's network.
	start = time.Now()
	if _, err := engine.Run(ctx, "build", "--network", "host", "--progress", "plain",
		"-f", filepath.Join(repoRoot, "deploy/compose/Dockerfile"),
		"--build-arg", "CMS_REVISION=containertest", "-t", image, repoRoot); err != nil {
		return fmt.Errorf("build %s from deploy/compose/Dockerfile: %w", image, err)
	}
	fmt.Fprintf(os.Stderr, "containers: %s built in %v\n", image, time.Since(start).Round(time.Second))
	return nil
}

// clearEngine removes every container, volume and network a killed run
// may have left on the engine, which is the tests' own, and keeps its
// cache bounded: images no tag names any more, and build cache beyond a
// few gigabytes.
func clearEngine(ctx context.Context) error {
	out, err := engine.Run(ctx, "ps", "--all", "--quiet")
	if err != nil {
		return err
	}
	if ids := lines(out); len(ids) > 0 {
		if _, err := engine.Run(ctx, append([]string{"rm", "--force", "--volumes"}, ids...)...); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"volume", "prune", "--force"},
		{"network", "prune", "--force"},
		{"image", "prune", "--force"},
		{"builder", "prune", "--force", "--keep-storage", "4gb"},
	} {
		if _, err := engine.Run(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// docker runs the client against the engine, failing t with its output.
func docker(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := engine.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lines splits the client's output into non-empty lines.
func lines(out string) []string {
	var ls []string
	for l := range strings.SplitSeq(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}
