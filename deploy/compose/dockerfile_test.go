package compose_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content/encoder"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, COPY, RUN
	args string
}

type stage struct {
	image, name string
	ins         []instruction
}

type dockerfile struct{ stages []stage }

// parseDockerfile reads the instructions of a Dockerfile: enough of the
// format for this repository's file (comments, continuations, stages),
// without pulling a builder into the module.
func parseDockerfile(text string) (dockerfile, error) {
	var df dockerfile
	var buf strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		// Comment and empty lines are dropped, inside continuations too.
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if buf.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			buf.WriteString(cont)
			buf.WriteString(" ")
			continue
		}
		buf.WriteString(line)
		cmd, args, _ := strings.Cut(buf.String(), " ")
		buf.Reset()
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")}
		if in.cmd == "FROM" {
			var f []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					f = append(f, w)
				}
			}
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
			continue
		}
		if len(df.stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return df, fmt.Errorf("line %d: %s before FROM", in.line, in.cmd)
		}
		last := &df.stages[len(df.stages)-1]
		last.ins = append(last.ins, in)
	}
	if buf.Len() > 0 {
		return df, fmt.Errorf("line %d: continuation runs past the end", start)
	}
	if len(df.stages) == 0 {
		return df, fmt.Errorf("no FROM")
	}
	return df, nil
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(string(b))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return df
}

func (df dockerfile) final() stage { return df.stages[len(df.stages)-1] }

// binaries lists the files the final stage copies into /usr/local/bin.
func (df dockerfile) binaries() []string {
	var out []string
	for _, c := range df.final().copies() {
		if c.dest == "/usr/local/bin/" {
			for _, src := range c.srcs {
				out = append(out, path.Base(src))
			}
		}
	}
	return out
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// last returns the arguments of the stage's last cmd instruction, the one
// in force.
func (s stage) last(cmd string) string {
	all := s.all(cmd)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1].args
}

type copyInstruction struct {
	from, chown string
	srcs        []string
	dest        string
}

func (s stage) copies() []copyInstruction {
	var out []copyInstruction
	for _, in := range append(s.all("COPY"), s.all("ADD")...) {
		var c copyInstruction
		var words []string
		for _, w := range strings.Fields(in.args) {
			switch {
			case strings.HasPrefix(w, "--from="):
				c.from = strings.TrimPrefix(w, "--from=")
			case strings.HasPrefix(w, "--chown="):
				c.chown = strings.TrimPrefix(w, "--chown=")
			case strings.HasPrefix(w, "--"):
			default:
				words = append(words, w)
			}
		}
		if len(words) > 0 && strings.HasPrefix(words[0], "[") {
			words = nil
			json.Unmarshal([]byte(in.args[strings.Index(in.args, "["):]), &words)
		}
		if len(words) >= 2 {
			c.srcs, c.dest = words[:len(words)-1], words[len(words)-1]
		}
		out = append(out, c)
	}
	return out
}

// copyDests lists the paths single files are copied to.
func (s stage) copyDests() []string {
	var out []string
	for _, c := range s.copies() {
		for _, src := range c.srcs {
			if strings.HasSuffix(c.dest, "/") {
				out = append(out, c.dest+path.Base(src))
			} else {
				out = append(out, c.dest)
			}
		}
	}
	return out
}

func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// buildScriptCommands lists the ./cmd packages deploy/build compiles.
func buildScriptCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/build"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || !strings.Contains(line, "go build") {
			continue
		}
		for _, m := range regexp.MustCompile(`\./cmd/([a-z]+)`).FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("deploy/build builds no ./cmd package")
	}
	slices.Sort(out)
	return out
}

// dockerignore holds the patterns BuildKit applies to this Dockerfile's
// context: Dockerfile.dockerignore beside it wins over the root's.
func dockerignore(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		p := path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		if neg {
			p = "!" + p
		}
		out = append(out, p)
	}
	return out
}

// ignored applies Docker's rules as far as the patterns here use them: a
// pattern excludes a path or any directory above it, "**/" stands for any
// directories, a later "!" pattern takes a path back.
func ignored(patterns []string, p string) bool {
	out := false
	for _, pat := range patterns {
		neg := strings.HasPrefix(pat, "!")
		pat = strings.TrimPrefix(pat, "!")
		parts := strings.Split(p, "/")
		for i := 1; i <= len(parts); i++ {
			if globMatch(pat, strings.Join(parts[:i], "/")) {
				out = !neg
				break
			}
		}
	}
	return out
}

func globMatch(pat, name string) bool {
	if rest, ok := strings.CutPrefix(pat, "**/"); ok {
		segs := strings.Split(name, "/")
		for i := range segs {
			if globMatch(rest, strings.Join(segs[i:], "/")) {
				return true
			}
		}
		return false
	}
	ok, _ := path.Match(pat, name)
	return ok
}

func TestDockerignoreMatcher(t *testing.T) {
	pats := []string{".git", "**/*.db", "bin", "pkg/x", "!pkg/x/keep.go"}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{".git", true}, {".git/HEAD", true}, {".github/x", false},
		{"cms.db", true}, {"a/b/cms.db", true}, {"cms.db.go", false},
		{"bin/api", true}, {"cmd/bin/api", false},
		{"pkg/x/a.go", true}, {"pkg/x/keep.go", false}, {"pkg/xy/a.go", false},
	} {
		if got := ignored(pats, tt.path); got != tt.want {
			t.Errorf("ignored(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	df, err := parseDockerfile("# syntax=docker/dockerfile:1\nARG V=1\nFROM a:1 AS b\n# note\nRUN x \\\n  # inside\n  y\nFROM --platform=$P c\nCOPY --from=b --chown=1:1 /o/p /o/q /d/\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(df.stages) != 2 || df.stages[0].image != "a:1" || df.stages[0].name != "b" || df.final().image != "c" {
		t.Fatalf("stages %+v", df.stages)
	}
	if run := df.stages[0].ins[0]; run.cmd != "RUN" || run.args != "x y" || run.line != 5 {
		t.Errorf("RUN = %+v, want x y from line 5", run)
	}
	c := df.final().copies()[0]
	if c.from != "b" || c.chown != "1:1" || !slices.Equal(c.srcs, []string{"/o/p", "/o/q"}) || c.dest != "/d/" {
		t.Errorf("COPY = %+v", c)
	}
	for _, bad := range []string{"RUN x\n", "FROM a\nRUN x \\\n", ""} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%q) accepted", bad)
		}
	}
}

func TestDockerfile(t *testing.T) {
	df := readDockerfile(t)
	builder, final := df.stages[0], df.final()
	p := loadProject(t, nil)

	checks := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"two stages: the Go of go.mod, then distroless static nonroot", func(t *testing.T) {
			if want := "golang:" + goVersion(t) + "-bookworm"; builder.image != want || builder.name == "" {
				t.Errorf("builder FROM %s AS %q, want %s AS a name", builder.image, builder.name, want)
			}
			if len(df.stages) != 2 || final.image != "gcr.io/distroless/static-debian12:nonroot" {
				t.Errorf("%d stages, final FROM %s; want 2, gcr.io/distroless/static-debian12:nonroot", len(df.stages), final.image)
			}
		}},
		{"the builder runs deploy/build", func(t *testing.T) {
			found := false
			for _, run := range builder.all("RUN") {
				var words []string
				for _, w := range strings.Fields(run.args) {
					if !strings.HasPrefix(w, "--mount=") {
						words = append(words, w)
					}
				}
				found = found || strings.Join(words, " ") == "deploy/build /out"
			}
			if !found {
				t.Errorf("no RUN deploy/build /out in %+v", builder.all("RUN"))
			}
		}},
		{"the builder passes the revision to deploy/build, which reads it", func(t *testing.T) {
			// The context has no .git: without the argument every image's
			// binaries would say "revision unknown".
			declared := slices.ContainsFunc(builder.all("ARG"), func(in instruction) bool {
				name, _, _ := strings.Cut(in.args, "=")
				return name == "CMS_REVISION"
			})
			script, err := os.ReadFile(filepath.Join(repoRoot, "deploy/build"))
			if err != nil {
				t.Fatal(err)
			}
			if !declared || !strings.Contains(string(script), "CMS_REVISION") {
				t.Errorf("builder declares ARG CMS_REVISION: %v; deploy/build reads it: %v", declared, strings.Contains(string(script), "CMS_REVISION"))
			}
		}},
		{"runs as nonroot", func(t *testing.T) {
			if u := final.last("USER"); !slices.Contains([]string{"nonroot", "nonroot:nonroot", "65532", "65532:65532"}, u) {
				t.Errorf("USER %q, want nonroot (65532)", u)
			}
		}},
		{"copies exactly the binaries deploy/build builds", func(t *testing.T) {
			bins := slices.Sorted(slices.Values(df.binaries()))
			if want := buildScriptCommands(t); !slices.Equal(bins, want) {
				t.Errorf("image has %v in /usr/local/bin, deploy/build builds %v", bins, want)
			}
			for _, c := range final.copies() {
				if c.dest != "/usr/local/bin/" {
					continue
				}
				for _, src := range c.srcs {
					if c.from != builder.name || path.Dir(src) != "/out" {
						t.Errorf("binary %s copied from %q, want /out of stage %q", src, c.from, builder.name)
					}
				}
			}
		}},
		{"COPY --from names an earlier stage", func(t *testing.T) {
			for i, st := range df.stages {
				for _, c := range st.copies() {
					if c.from == "" {
						continue
					}
					if !slices.ContainsFunc(df.stages[:i], func(s stage) bool { return s.name == c.from }) {
						t.Errorf("stage %d copies from %q, not an earlier stage", i, c.from)
					}
				}
			}
		}},
		{"what is copied from the context exists and is not ignored", func(t *testing.T) {
			pats := dockerignore(t)
			n := 0
			for _, st := range df.stages {
				for _, c := range st.copies() {
					if c.from != "" {
						continue
					}
					for _, src := range c.srcs {
						n++
						if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
							t.Errorf("COPY %s: %v", src, err)
						}
						if src != "." && ignored(pats, path.Clean(src)) {
							t.Errorf("COPY %s: excluded by Dockerfile.dockerignore", src)
						}
					}
				}
			}
			if n == 0 {
				t.Error("nothing copied from the context")
			}
		}},
		{"the build's sources are in the context, .git and local state are not", func(t *testing.T) {
			pats := dockerignore(t)
			for _, p := range []string{".git", ".local", "scratch", "bin", "cms.db", "deploy/compose/.env"} {
				if !ignored(pats, p) {
					t.Errorf("%s is sent to the builder", p)
				}
			}
			needed := []string{"go.mod", "go.sum", "deploy/build", "deploy/install-encoder", "VERSION", "LICENSE", "NOTICE"}
			for _, dir := range []string{"cmd", "pkg", "schemas"} {
				filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "/testdata/") {
						return err
					}
					rel, _ := filepath.Rel(repoRoot, p)
					needed = append(needed, filepath.ToSlash(rel))
					return nil
				})
			}
			if len(needed) < 50 {
				t.Fatalf("found only %d source files", len(needed))
			}
			for _, p := range needed {
				if ignored(pats, p) {
					t.Errorf("%s is needed by the build but excluded", p)
				}
			}
		}},
		{"the sentence encoder's model where the api reads it, with its licence", func(t *testing.T) {
			installed := slices.ContainsFunc(builder.all("RUN"), func(in instruction) bool {
				return strings.Contains(in.args, "deploy/install-encoder /out/encoder")
			})
			copied := slices.ContainsFunc(final.copies(), func(c copyInstruction) bool {
				return c.from == builder.name && slices.Equal(c.srcs, []string{"/out/encoder"}) && c.dest == encoder.DefaultDir
			})
			notice := slices.ContainsFunc(final.copies(), func(c copyInstruction) bool {
				return c.from == "" && slices.Equal(c.srcs, []string{"NOTICE"})
			})
			if !installed || !copied || !notice {
				t.Errorf("builder runs deploy/install-encoder /out/encoder: %v; copied to %s: %v; NOTICE copied: %v", installed, encoder.DefaultDir, copied, notice)
			}
		}},
		{"a /data owned by nonroot for the content volume", func(t *testing.T) {
			chowned := slices.ContainsFunc(builder.all("RUN"), func(in instruction) bool {
				return strings.Contains(in.args, "chown 65532:65532 /data")
			})
			copied := slices.ContainsFunc(final.copies(), func(c copyInstruction) bool {
				return c.from == builder.name && c.chown == "65532:65532" && slices.Equal(c.srcs, []string{"/data"}) && c.dest == "/data"
			})
			if !chowned || !copied || final.last("WORKDIR") != "/data" {
				t.Errorf("builder chowns /data: %v; copied with --chown=65532:65532: %v; WORKDIR %q", chowned, copied, final.last("WORKDIR"))
			}
			for _, s := range p.Services {
				if hasVolume(s, "content", "/data") && s.Build == nil {
					t.Errorf("%s mounts the content volume but is not this image", s.Name)
				}
			}
		}},
		{"exposes the servers' listen ports", func(t *testing.T) {
			var want []string
			for name := range ourServices {
				s := p.Services[name]
				if v, ok := listenEnv[command(s)]; ok {
					want = append(want, port(t, env(s, v)))
				}
			}
			slices.Sort(want)
			got := strings.Fields(final.last("EXPOSE"))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("EXPOSE %v, servers listen on %v", got, want)
			}
		}},
		{"no ENTRYPOINT: compose commands start with the binary", func(t *testing.T) {
			if e := final.all("ENTRYPOINT"); len(e) > 0 {
				t.Errorf("ENTRYPOINT %q would run before every compose command", e[0].args)
			}
		}},
		{"OCI labels", func(t *testing.T) {
			labels := strings.Join(func() []string {
				var out []string
				for _, in := range final.all("LABEL") {
					out = append(out, in.args)
				}
				return out
			}(), " ")
			for _, key := range []string{"org.opencontainers.image.title=", "org.opencontainers.image.source=", "org.opencontainers.image.description=",
				`org.opencontainers.image.licenses="Apache-2.0"`} {
				if !strings.Contains(labels, key) {
					t.Errorf("no label %s", strings.TrimSuffix(key, "="))
				}
			}
		}},
	}
	for _, c := range checks {
		t.Run(c.name, c.check)
	}
}
