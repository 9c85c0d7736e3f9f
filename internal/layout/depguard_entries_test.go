package layout_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// configDir is the directory of .golangci.yml, which golangci-lint calls
// ${config-path}: the module's root, seen from this package.
const configDir = "../.."

// depguardRule is what a depguard rule of .golangci.yml says, as far as
// the tests here read it.
type depguardRule struct {
	Files []string `yaml:"files"`
	Allow []string `yaml:"allow"`
	Deny  []struct {
		Pkg string `yaml:"pkg"`
	} `yaml:"deny"`
}

// depguardRules reads the depguard rules of the module's .golangci.yml.
func depguardRules(t *testing.T) map[string]depguardRule {
	t.Helper()
	name := filepath.Join(configDir, ".golangci.yml")
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		Linters struct {
			Settings struct {
				Depguard struct {
					Rules map[string]depguardRule `yaml:"rules"`
				} `yaml:"depguard"`
			} `yaml:"settings"`
		} `yaml:"linters"`
	}
	if err := yaml.Unmarshal(src, &config); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	rules := config.Linters.Settings.Depguard.Rules
	if len(rules) == 0 {
		t.Fatalf("%s: found no rules under linters.settings.depguard.rules", name)
	}
	return rules
}

// modulePackages lists the import paths of the module's packages, tests
// only packages included. -find names them without loading their
// dependencies, so nothing is downloaded.
func modulePackages(t *testing.T) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-e", "-find", "-f", "{{.ImportPath}}", module+"/...")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v", module, err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		t.Fatalf("go list %s/... listed no packages", module)
	}
	return pkgs
}

// TestDepguardEntriesNameWhatExists fails when a depguard rule of
// .golangci.yml names a part of the module that is not there: an allow
// or deny entry of this module's that no package's import path starts
// with (depguard's entries are prefixes), or a files glob under
// ${config-path} whose directory is missing. Such an entry guards
// nothing, silently, once the packages it was written for have moved.
func TestDepguardEntriesNameWhatExists(t *testing.T) {
	rules := depguardRules(t)
	pkgs := modulePackages(t)
	names := make([]string, 0, len(rules))
	for name := range rules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rule := rules[name]
		t.Run(name, func(t *testing.T) {
			entries := map[string][]string{"allow": rule.Allow}
			for _, d := range rule.Deny {
				entries["deny"] = append(entries["deny"], d.Pkg)
			}
			for _, list := range []string{"allow", "deny"} {
				for _, e := range entries[list] {
					if e != module && !strings.HasPrefix(e, module+"/") {
						continue // the standard library's, or another module's
					}
					if !slices.ContainsFunc(pkgs, func(p string) bool { return strings.HasPrefix(p, e) }) {
						t.Errorf("%s entry %s: no package of the module has an import path that starts with it", list, e)
					}
				}
			}
			for _, glob := range rule.Files {
				p, wild, ok := globPath(glob)
				if !ok {
					continue
				}
				fi, err := os.Stat(filepath.Join(configDir, filepath.FromSlash(p)))
				switch {
				case err != nil:
					t.Errorf("files entry %q: %v", glob, err)
				case wild && !fi.IsDir():
					t.Errorf("files entry %q: %s is not a directory", glob, p)
				}
			}
		})
	}
}

// globPath returns the path, relative to ${config-path}, that a files
// entry of a depguard rule names: the entry without its "!" negation and
// its "${config-path}/", cut before the first element that holds a
// wildcard, which leaves the directory the entry matches files in (wild
// is then true). ok is false for entries that name no path under
// ${config-path}, such as $test.
func globPath(glob string) (p string, wild, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(glob, "!"), "${config-path}/")
	if !ok {
		return "", false, false
	}
	elems := strings.Split(rest, "/")
	for i, e := range elems {
		if strings.ContainsAny(e, `*?[{\`) {
			elems, wild = elems[:i], true
			break
		}
	}
	if len(elems) == 0 {
		return ".", wild, true
	}
	return strings.Join(elems, "/"), wild, true
}

func TestGlobPath(t *testing.T) {
	cases := []struct {
		glob, path string
		wild, ok   bool
	}{
		{"${config-path}/pkg/edge/**", "pkg/edge", true, true},
		{"!${config-path}/pkg/edge/**", "pkg/edge", true, true},
		{"${config-path}/cmd/api/*.go", "cmd/api", true, true},
		{"${config-path}/cmd/api/main.go", "cmd/api/main.go", false, true},
		{"${config-path}/**", ".", true, true},
		{"!$test", "", false, false},
		{"$test", "", false, false},
		{"**/pkg/edge/**", "", false, false},
	}
	for _, c := range cases {
		p, wild, ok := globPath(c.glob)
		if p != c.path || wild != c.wild || ok != c.ok {
			t.Errorf("globPath(%q) = %q, %v, %v; want %q, %v, %v", c.glob, p, wild, ok, c.path, c.wild, c.ok)
		}
	}
}
