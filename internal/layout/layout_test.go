// Package layout_test checks the shape of the module: the binaries link
// only the product (cmd/ and pkg/), never the harnesses of internal/ or
// the development mains of dev/, and domain packages stay free of HTTP.
package layout_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/assistantcms/cms"

// goList runs go list from the module root with a template and returns
// one line a package.
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	args := append([]string{"list", "-f", format}, patterns...)
	cmd := exec.CommandContext(context.Background(), "go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func isTooling(path string) bool {
	return strings.HasPrefix(path, module+"/internal/") || strings.HasPrefix(path, module+"/dev/")
}

func TestBinariesLinkOnlyTheProduct(t *testing.T) {
	deps := goList(t, `{{join .Deps "\n"}}`, "./cmd/...")
	var own int
	for _, d := range deps {
		if !strings.HasPrefix(d, module+"/") {
			continue
		}
		own++
		if isTooling(d) {
			t.Errorf("the binaries link %s, which is tooling", d)
		}
		if rest := strings.TrimPrefix(d, module+"/"); !strings.HasPrefix(rest, "pkg/") && !strings.HasPrefix(rest, "schemas/") {
			t.Errorf("the binaries link %s, outside pkg/ and schemas/", d)
		}
	}
	if own < 10 {
		t.Fatalf("found %d of the module's packages among the binaries' dependencies; the listing is wrong", own)
	}
}

// Product code (tests aside) never imports tooling, and the packages the
// HTTP edge builds on do not decide HTTP statuses.
func TestProductImportsFlowOneWay(t *testing.T) {
	noHTTP := map[string]bool{module + "/pkg/pipeline/event": true}
	lines := goList(t, `{{.ImportPath}} {{join .Imports " "}}`, "./pkg/...")
	if len(lines) < 10 {
		t.Fatalf("listed %d product packages; the listing is wrong", len(lines))
	}
	for _, l := range lines {
		f := strings.Fields(l)
		pkg, imports := f[0], f[1:]
		for _, imp := range imports {
			if isTooling(imp) {
				t.Errorf("%s imports %s, which is tooling", pkg, imp)
			}
			if strings.HasPrefix(imp, module+"/cmd/") {
				t.Errorf("%s imports %s, a command", pkg, imp)
			}
			if noHTTP[pkg] && imp == "net/http" {
				t.Errorf("%s imports net/http; HTTP statuses are chosen at the HTTP edge", pkg)
			}
		}
	}
}

// The token and event domains report kinds of failure; the HTTP edge maps
// them to statuses.
func TestDomainPackagesChooseNoHTTPStatus(t *testing.T) {
	for _, l := range goList(t, `{{.Dir}} {{join .GoFiles " "}}`, "./pkg/pipeline/event", "./pkg/auth") {
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("no Go files listed in %q", l)
		}
		for _, name := range f[1:] {
			src, err := os.ReadFile(filepath.Join(f[0], name))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "http.Status") {
				t.Errorf("%s names an HTTP status", filepath.Join(f[0], name))
			}
		}
	}
}
