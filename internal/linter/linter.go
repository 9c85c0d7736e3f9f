// Package linter installs golangci-lint at the version the module's
// configuration (.golangci.yml) is written for, from the Go module proxy,
// into the user's cache directory, once.
package linter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Version is the golangci-lint release .golangci.yml is written for; its
// staticcheck is honnef.co/go/tools v0.8.2.
const Version = "v2.15.0"

const command = "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"

// Install returns the path of golangci-lint Version, building it with
// go install when the cache does not hold it yet (a few minutes; later
// calls return at once). out is told when a build starts.
func Install(ctx context.Context, out io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory for golangci-lint: %w", err)
	}
	dir := filepath.Join(cache, "assistantcms", "golangci-lint-"+Version)
	bin := filepath.Join(dir, "golangci-lint")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("look for golangci-lint: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	// Built into a directory of its own, then renamed into place, so that
	// a build running beside this one never sees half a binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("create a build directory in %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", command+"@"+Version)
	// Outside the module, with no flags of its own: the tool's module
	// resolves its dependencies as its release pins them.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	fmt.Fprintf(out, "installing golangci-lint %s into %s (go install, once)\n", Version, dir)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", command, Version, err, log.Bytes())
	}
	if err := os.Rename(filepath.Join(tmp, "golangci-lint"), bin); err != nil {
		return "", fmt.Errorf("move golangci-lint into %s: %w", dir, err)
	}
	return bin, nil
}
