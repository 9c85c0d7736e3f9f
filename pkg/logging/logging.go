// Package logging builds the structured loggers the commands write with.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel reads debug, info, warn or error, in any case.
func ParseLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return l, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return l, nil
}

// JSON returns a logger writing JSON lines at level or above: the form the
// services log in, for log collectors.
func JSON(w io.Writer, level string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Text returns a logger writing key=value lines, for commands a person runs.
func Text(w io.Writer, level string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
