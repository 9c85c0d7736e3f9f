package devdocker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ComposeVersion is the Docker Compose release the tests drive the engine
// with: the newest whose dependencies the Go module proxy serves here
// (v5.7.0 and v5.7.1 need github.com/docker/secrets-engine, which it
// refuses).
const ComposeVersion = "v5.6.0"

// InstallCompose builds Docker Compose from the Go module proxy into
// dir/cli-plugins/docker-compose, unless that version is there, and sets
// e.Config to dir, so that "docker compose" finds it.
func (e *Engine) InstallCompose(ctx context.Context, dir string) error {
	plugin := filepath.Join(dir, "cli-plugins", "docker-compose")
	stamp := plugin + ".version"
	if b, err := os.ReadFile(stamp); err == nil && string(b) == ComposeVersion {
		e.Config = dir
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(plugin), 0o755); err != nil {
		return fmt.Errorf("build Docker Compose: %w", err)
	}
	work, err := os.MkdirTemp("", "compose-build-")
	if err != nil {
		return fmt.Errorf("build Docker Compose: %w", err)
	}
	defer os.RemoveAll(work)
	const module = "github.com/docker/compose/v5"
	steps := [][]string{
		{"go", "mod", "init", "composebuild"},
		{"go", "get", module + "@" + ComposeVersion},
		{"go", "build", "-trimpath", "-ldflags", "-s -w -X " + module + "/internal.Version=" + ComposeVersion,
			"-o", plugin + ".tmp", module + "/cmd"},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build Docker Compose %s: %v: %w\n%s", ComposeVersion, args, err, out.String())
		}
	}
	if err := os.Rename(plugin+".tmp", plugin); err != nil {
		return fmt.Errorf("install Docker Compose: %w", err)
	}
	if err := os.WriteFile(stamp, []byte(ComposeVersion), 0o644); err != nil {
		return fmt.Errorf("install Docker Compose: %w", err)
	}
	e.Config = dir
	return nil
}
