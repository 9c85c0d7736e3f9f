// Package envflag defines command-line flags whose defaults come from
// environment variables, so every setting can be given either way; a flag
// on the command line wins over the environment. A variable that was
// renamed can keep its former name as a deprecated alias.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Set wraps a flag.FlagSet and remembers environment values that did not
// parse, reported by Parse, and the deprecated names the environment used.
type Set struct {
	*flag.FlagSet
	lookup  func(string) (string, bool)
	errs    []error
	aliases map[string][]string // variable -> its former names
	defined map[string]bool     // variables of the flags defined so far
	used    []Deprecation
}

// Deprecation is one former variable name found set in the environment.
type Deprecation struct {
	// Old is the former name, New the one that replaced it.
	Old, New string
	// Ignored says New was set too, so Old's value was not used.
	Ignored bool
}

// New returns a Set. lookup reads the environment; nil means os.LookupEnv.
func New(fs *flag.FlagSet, lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return &Set{FlagSet: fs, lookup: lookup, aliases: map[string][]string{}, defined: map[string]bool{}}
}

// Alias makes old a deprecated former name of the variable env: the flag
// defined with env reads old when env is not set, and Deprecations reports
// every use of old. It must precede the flag's definition; otherwise it
// panics, as redefining a flag does.
func (s *Set) Alias(env, old string) {
	if s.defined[env] {
		panic(fmt.Sprintf("envflag: alias %s of %s declared after the flag reading %s", old, env, env))
	}
	s.aliases[env] = append(s.aliases[env], old)
}

// Deprecations lists the former variable names the environment set, in
// the order their flags were defined.
func (s *Set) Deprecations() []Deprecation { return s.used }

// LogDeprecations warns of each former variable name the environment set,
// naming the variable to set instead.
func (s *Set) LogDeprecations(log *slog.Logger) {
	for _, d := range s.used {
		if d.Ignored {
			log.Warn("deprecated environment variable ignored: "+d.New+" is set too and wins; unset "+d.Old, "old", d.Old, "new", d.New)
			continue
		}
		log.Warn("deprecated environment variable: set "+d.New+" instead of "+d.Old, "old", d.Old, "new", d.New)
	}
}

// env reads the variable env, or failing that one of its former names, and
// returns the name it was read from with its value.
func (s *Set) env(env string) (from, value string, ok bool) {
	s.defined[env] = true
	get := func(name string) (string, bool) {
		v, ok := s.lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	from = env
	value, ok = get(env)
	for _, old := range s.aliases[env] {
		v, set := get(old)
		if !set {
			continue
		}
		s.used = append(s.used, Deprecation{Old: old, New: env, Ignored: ok})
		if !ok {
			from, value, ok = old, v, true
		}
	}
	return from, value, ok
}

// usage appends the variable, and any former names, to a flag's help. The
// variable comes as "(env NAME)", the form tools read help for.
func (s *Set) usage(usage, env string) string {
	usage += " (env " + env + ")"
	if old := s.aliases[env]; len(old) > 0 {
		usage += " (formerly " + strings.Join(old, ", ") + ", deprecated)"
	}
	return usage
}

// String defines a string flag with default from env.
func (s *Set) String(name, env, def, help string) *string {
	if _, v, ok := s.env(env); ok {
		def = v
	}
	return s.FlagSet.String(name, def, s.usage(help, env))
}

// Secret is String for values help must never print, such as passwords
// and URLs that may hold them: the environment's value is used, but the
// usage text shows def as the default. When env is unset, the variable
// env+"_FILE" may name a file holding the value (trailing white space
// dropped), as mounted secrets are; setting both is an error, and so is a
// file that cannot be read or is empty. Errors name the variables and the
// path, never the value.
func (s *Set) Secret(name, env, def, help string) *string {
	fileEnv := env + FileSuffix
	usage := strings.Replace(s.usage(help, env), "(env "+env+")", "(env "+env+" or "+fileEnv+")", 1)
	p := s.FlagSet.String(name, def, usage)
	from, v, ok := s.env(env)
	path, fromFile := s.lookup(fileEnv)
	path = strings.TrimSpace(path)
	fromFile = fromFile && path != ""
	switch {
	case ok && fromFile:
		s.errs = append(s.errs, fmt.Errorf("%s and %s are both set; set only one of them", from, fileEnv))
	case ok:
		*p = v
	case fromFile:
		v, err := readSecretFile(path)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: %w", fileEnv, path, err))
			break
		}
		*p = v
	}
	return p
}

// FileSuffix ends the name of the variable that names a file holding a
// secret's value.
const FileSuffix = "_FILE"

// readSecretFile returns a secret file's content without trailing white
// space (the newline editors and "echo" add). Its errors never quote the
// content.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already named by the caller
		}
		return "", fmt.Errorf("read the secret file: %w", err)
	}
	v := strings.TrimRight(string(b), " \t\r\n")
	if v == "" {
		return "", errors.New("the secret file is empty")
	}
	return v, nil
}

// Int defines an int flag with default from env.
func (s *Set) Int(name, env string, def int, help string) *int {
	if from, v, ok := s.env(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", from, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Int(name, def, s.usage(help, env))
}

// Int64 defines an int64 flag with default from env.
func (s *Set) Int64(name, env string, def int64, help string) *int64 {
	if from, v, ok := s.env(env); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", from, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Int64(name, def, s.usage(help, env))
}

// Float64 defines a float flag with default from env.
func (s *Set) Float64(name, env string, def float64, help string) *float64 {
	if from, v, ok := s.env(env); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a number", from, v))
		} else {
			def = n
		}
	}
	return s.FlagSet.Float64(name, def, s.usage(help, env))
}

// Duration defines a duration flag with default from env.
func (s *Set) Duration(name, env string, def time.Duration, help string) *time.Duration {
	if from, v, ok := s.env(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a duration (like 5s or 250ms)", from, v))
		} else {
			def = d
		}
	}
	return s.FlagSet.Duration(name, def, s.usage(help, env))
}

// Bool defines a bool flag with default from env.
func (s *Set) Bool(name, env string, def bool, help string) *bool {
	if from, v, ok := s.env(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a boolean", from, v))
		} else {
			def = b
		}
	}
	return s.FlagSet.Bool(name, def, s.usage(help, env))
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
