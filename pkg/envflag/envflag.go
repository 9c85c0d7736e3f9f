// Package envflag defines command-line flags whose defaults come from
// environment variables, so every setting can be given either way; a flag
// on the command line wins over the environment.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Set wraps a flag.FlagSet and remembers environment values that did not
// parse, reported by Parse.
type Set struct {
	*flag.FlagSet
	lookup func(string) (string, bool)
	errs   []error
}

// New returns a Set. lookup reads the environment; nil means os.LookupEnv.
func New(fs *flag.FlagSet, lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return &Set{FlagSet: fs, lookup: lookup}
}

func (s *Set) env(name, env string) (string, bool) {
	v, ok := s.lookup(env)
	return strings.TrimSpace(v), ok && strings.TrimSpace(v) != ""
}

func usage(usage, env string) string { return usage + " (env " + env + ")" }

// String defines a string flag with default from env.
func (s *Set) String(name, env, def, help string) *string {
	if v, ok := s.env(name, env); ok {
		def = v
	}
	return s.FlagSet.String(name, def, usage(help, env))
}

// Secret is String for values help must never print, such as passwords
// and URLs that may hold them: the environment's value is used, but the
// usage text shows def as the default.
func (s *Set) Secret(name, env, def, help string) *string {
	p := s.FlagSet.String(name, def, usage(help, env))
	if v, ok := s.env(name, env); ok {
		*p = v
	}
	return p
}

// Int defines an int flag with default from env.
func (s *Set) Int(name, env string, def int, help string) *int {
	if v, ok := s.env(name, env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Int(name, def, usage(help, env))
}

// Int64 defines an int64 flag with default from env.
func (s *Set) Int64(name, env string, def int64, help string) *int64 {
	if v, ok := s.env(name, env); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Int64(name, def, usage(help, env))
}

// Float64 defines a float flag with default from env.
func (s *Set) Float64(name, env string, def float64, help string) *float64 {
	if v, ok := s.env(name, env); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a number", env, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Float64(name, def, usage(help, env))
}

// Duration defines a duration flag with default from env.
func (s *Set) Duration(name, env string, def time.Duration, help string) *time.Duration {
	if v, ok := s.env(name, env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a duration (like 5s or 250ms)", env, v))
		} else {
			def = d
		}
	}
	return s.FlagSet.Duration(name, def, usage(help, env))
}

// Bool defines a bool flag with default from env.
func (s *Set) Bool(name, env string, def bool, help string) *bool {
	if v, ok := s.env(name, env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a boolean", env, v))
		} else {
			def = b
		}
	}
	return s.FlagSet.Bool(name, def, usage(help, env))
}

// Parse parses args and reports bad environment values and bad flags.
func (s *Set) Parse(args []string) error {
	if err := s.FlagSet.Parse(args); err != nil {
		return err
	}
	return errors.Join(s.errs...)
}

// List splits a comma-separated value, dropping empty items.
func List(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
