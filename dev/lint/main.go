// Command lint runs golangci-lint with the module's configuration
// (.golangci.yml), at the version that configuration is written for,
// which it installs into the user's cache directory when missing:
//
//	go run ./dev/lint [golangci-lint run flags] [packages]
//
// Without packages it checks the whole module (golangci-lint's ./...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/assistantcms/cms/internal/linter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := linter.Install(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(1)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"run"}, os.Args[1:]...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(1)
	}
}
