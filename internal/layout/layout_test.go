// Package layout_test checks the shape of the module. The import rules
// (the binaries link only pkg/ and schemas/, the walls between the
// event model, the pipeline, content, the tenancy model, the token domain
// and the HTTP plumbing) are
// golangci-lint's depguard rules in .golangci.yml, which .ci/run runs;
// depguard_test.go shows that they refuse what they should. What an
// import rule cannot say is checked here.
package layout_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/assistantcms/cms"

// The token domain reads HTTP headers, so it imports net/http, which a
// depguard rule therefore cannot forbid; it reports kinds of failure and
// the HTTP edge maps them to statuses. (The event model may not import
// net/http at all: a depguard rule.)
func TestTokenDomainChoosesNoHTTPStatus(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), "go", "list", "-f", `{{.Dir}} {{join .GoFiles " "}}`, module+"/pkg/auth")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		t.Fatalf("no Go files listed in %q", out)
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

// The pipeline, the token domain and the event sink's binary (which
// reads tokens from the database the content store shares) link no
// content package, not even through another package: a direct import is
// a depguard rule, a transitive one only the link graph shows.
func TestPipelineLinksNoContent(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}",
		module+"/pkg/pipeline/...", module+"/pkg/auth/...", module+"/pkg/tenancy/...", module+"/cmd/ingest")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/pkg/tenancy/tenancydb") {
		t.Fatalf("go list named no %s/pkg/tenancy/tenancydb among %d packages: not the link graph asked for", module, len(deps))
	}
	for _, p := range deps {
		if p == module+"/pkg/content" || strings.HasPrefix(p, module+"/pkg/content/") {
			t.Errorf("the pipeline, the token domain or cmd/ingest links %s", p)
		}
	}
}
