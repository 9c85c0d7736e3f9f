// Package debpkg installs the Debian packages tests and local tools need
// (ClickHouse, PostgreSQL, promtool) with apt when a command they provide
// is missing.
package debpkg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// Find returns the path of the first of names found on PATH or as given.
func Find(names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed", names[0])
}

// Ensure installs packages with apt unless one of names is already
// there, and returns the command's path. It needs root; out receives
// apt's output.
func Ensure(ctx context.Context, out io.Writer, names []string, packages ...string) (string, error) {
	return EnsureFound(ctx, out, func() (string, error) { return Find(names...) }, packages...)
}

// EnsureFound is Ensure for commands that are not found by name on PATH
// (PostgreSQL's live in a versioned directory): find returns the path of
// what the packages provide, or an error when it is missing.
func EnsureFound(ctx context.Context, out io.Writer, find func() (string, error), packages ...string) (string, error) {
	p, err := find()
	if err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w, and installing it needs root: apt-get install %v", err, packages)
	}
	if err := Install(ctx, out, packages...); err != nil {
		return "", err
	}
	p, err = find()
	if err != nil {
		return "", errors.Join(fmt.Errorf("installed %v", packages), err)
	}
	return p, nil
}

// Install installs packages with apt, from the machine's own apt sources
// (its mirror, its proxy), after reading their lists. It needs root; out
// receives apt's output.
func Install(ctx context.Context, out io.Writer, packages ...string) error {
	for _, args := range [][]string{
		{"apt-get", "update", "-qq"},
		append([]string{"apt-get", "install", "-y", "-qq", "--no-install-recommends"}, packages...),
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%v: %w", args, err)
		}
	}
	return nil
}
