package compose_test

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestBuild runs deploy/build as CI and the Dockerfile do, then checks the
// binaries the image would hold.
func TestBuild(t *testing.T) {
	out := t.TempDir()
	build := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "deploy/build"), out)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build: %v\n%s", err, b)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, e := range entries {
		built = append(built, e.Name())
	}
	bin := func(name string) string { return filepath.Join(out, name) }
	// help returns the flag help of a binary (and subcommand), which names
	// each flag's environment variable.
	help := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin(args[0]), append(args[1:], "-h")...)
		cmd.Env = []string{}
		b, _ := cmd.CombinedOutput() // -h exits 0 or 1 by binary; the text is what counts
		if !strings.Contains(string(b), "(env ") {
			t.Fatalf("%q -h names no environment variable:\n%s", args, b)
		}
		return string(b)
	}

	checks := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"builds what the script names and the image copies", func(t *testing.T) {
			if want := buildScriptCommands(t); !slices.Equal(built, want) {
				t.Errorf("deploy/build wrote %v, its go build names %v", built, want)
			}
			if want := slices.Sorted(slices.Values(readDockerfile(t).binaries())); !slices.Equal(built, want) {
				t.Errorf("deploy/build wrote %v, the image copies %v", built, want)
			}
		}},
		{"static, stripped, trimmed, with go.mod's Go", func(t *testing.T) {
			for _, name := range built {
				f, err := elf.Open(bin(name))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				defer f.Close()
				for _, p := range f.Progs {
					if p.Type == elf.PT_INTERP {
						t.Errorf("%s: has an interpreter (PT_INTERP): dynamically linked", name)
					}
				}
				if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
					t.Errorf("%s: needs shared libraries %v (%v)", name, libs, err)
				}
				if f.Section(".symtab") != nil {
					t.Errorf("%s: has a symbol table: not built with -ldflags=-s", name)
				}
				info, err := buildinfo.ReadFile(bin(name))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				settings := map[string]string{}
				for _, s := range info.Settings {
					settings[s.Key] = s.Value
				}
				if info.GoVersion != "go"+goVersion(t) || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
					t.Errorf("%s: %s CGO_ENABLED=%q -trimpath=%q, want go%s, 0, true", name, info.GoVersion, settings["CGO_ENABLED"], settings["-trimpath"], goVersion(t))
				}
			}
		}},
		{"every binary and service answers -version with VERSION and the revision", func(t *testing.T) {
			want := releaseVersion(t)
			// A checkout's commit, as git rev-parse --short prints it;
			// "unknown" outside one.
			rev := `[0-9a-f]{7,40}`
			if _, err := os.Stat(filepath.Join(repoRoot, ".git")); err != nil {
				rev = "unknown"
			}
			for _, args := range [][]string{{"ingest"}, {"consumer"}, {"api"}, {"api", "serve"}, {"api", "gateway"}} {
				cmd := exec.CommandContext(t.Context(), bin(args[0]), append(args[1:], "-version")...)
				cmd.Env = []string{}
				b, err := cmd.Output()
				line := regexp.MustCompile(`^` + args[0] + ` ` + regexp.QuoteMeta(want) + ` \(revision ` + rev + `, go` + regexp.QuoteMeta(goVersion(t)) + `\)\n$`)
				if err != nil || !line.Match(b) {
					t.Errorf("%q -version: %v, printed %q; want a line matching %s", args, err, b, line)
				}
			}
		}},
		{"the built api probes", func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer srv.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			closed := "http://" + ln.Addr().String() + "/readyz"
			ln.Close()
			for _, tt := range []struct {
				url  string
				code int
			}{
				{srv.URL + "/readyz", 0},
				{srv.URL + "/down", 1},
				{closed, 1},
				{"no-scheme:8080", 1},
			} {
				cmd := exec.CommandContext(t.Context(), bin("api"), "probe", "-timeout", "2s", tt.url)
				cmd.Env = []string{}
				b, err := cmd.CombinedOutput()
				code := 0
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					code = exit.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != tt.code {
					t.Errorf("api probe %s: exit %d, want %d\n%s", tt.url, code, tt.code, b)
				}
			}
		}},
		{"compose sets only variables the binaries read", func(t *testing.T) {
			p := loadProject(t, nil)
			envName := regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)(?: or ([A-Z][A-Z0-9_]*_FILE))?\)`)
			for name := range ourServices {
				s := p.Services[name]
				text := help(t, filepath.Base(s.Command[0]))
				if c := command(s); c == "api serve" || c == "api gateway" {
					text += help(t, "api", s.Command[1])
				}
				known := map[string]bool{}
				for _, m := range envName.FindAllStringSubmatch(text, -1) {
					known[m[1]] = true
					if m[2] != "" {
						known[m[2]] = true
					}
				}
				for v := range s.Environment {
					if !known[v] {
						t.Errorf("%s (%s): sets %s, which it does not read", name, command(s), v)
					}
				}
			}
		}},
	}
	for _, c := range checks {
		t.Run(c.name, c.check)
	}
}

func TestBuildUsage(t *testing.T) {
	for _, args := range [][]string{nil, {""}, {"a", "b"}} {
		cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "deploy/build"), args...)
		b, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(b), "usage: deploy/build OUTDIR") {
			t.Errorf("deploy/build %q: %v, want exit 2 with usage\n%s", args, err, b)
		}
	}
}

// releaseVersion is the version in VERSION, which deploy/build stamps.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("VERSION %q: want a semantic version such as 0.19.0", v)
	}
	return v
}
