package layout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/linter"
)

// TestLinterRefusesImportsAcrossTheWalls runs golangci-lint with the
// module's .golangci.yml on a small module of the same name, whose files
// each make one import: every import across a wall the configuration
// writes down is reported under that wall's rule, and the imports the
// layering allows (tests included) are not.
func TestLinterRefusesImportsAcrossTheWalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := linter.Install(ctx, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file, imports string
		rule          string // "" when the import is allowed
	}{
		{"pkg/pipeline/event/a.go", module + "/pkg/pipeline/kafka", "event-is-the-model"},
		{"pkg/pipeline/event/b.go", module + "/pkg/pipeline/chstore/reads", "event-is-the-model"},
		{"pkg/pipeline/event/c.go", "github.com/segmentio/kafka-go", "event-is-the-model"},
		{"pkg/pipeline/event/d.go", "net/http", "event-is-the-model"},
		{"pkg/pipeline/event/scan/a.go", "github.com/ClickHouse/clickhouse-go/v2", "event-is-the-model"},
		{"pkg/pipeline/event/a_test.go", module + "/pkg/pipeline/kafka", ""},
		{"pkg/edge/httpserve/a.go", module + "/pkg/auth", "edge-is-plumbing"},
		{"pkg/edge/cors/a.go", module + "/pkg/operator/statuspage", "edge-is-plumbing"},
		{"pkg/edge/httpserve/b.go", module + "/pkg/buildinfo", ""},
		{"pkg/content/contentapi/a.go", module + "/schemas/clickhouse", "contentapi-serves-content"},
		{"pkg/content/contentapi/b.go", module + "/pkg/operator/analyticspage", "contentapi-serves-content"},
		{"pkg/content/contentapi/c.go", module + "/pkg/operator/statuspage", "contentapi-serves-content"},
		{"pkg/content/contentapi/d.go", "github.com/ClickHouse/clickhouse-go/v2", "contentapi-serves-content"},
		{"pkg/content/contentapi/e.go", module + "/pkg/edge/httpserve", ""},
		{"pkg/content/search/a.go", module + "/pkg/pipeline/event", "content-apart-from-pipeline"},
		{"pkg/pipeline/ingest/a.go", module + "/pkg/content", "pipeline-apart-from-content"},
		{"pkg/pipeline/ingest/b.go", module + "/pkg/auth", ""},
		{"pkg/pipeline/ingest/c.go", module + "/pkg/tenancy", ""},
		{"pkg/tenancy/a.go", module + "/pkg/content", "tenancy-is-below-both"},
		{"pkg/tenancy/b.go", module + "/pkg/auth", "tenancy-is-below-both"},
		{"pkg/tenancy/c.go", module + "/pkg/pipeline/event", "tenancy-is-below-both"},
		{"pkg/tenancy/a_test.go", module + "/pkg/content", ""},
		{"pkg/sqldb/a.go", module + "/pkg/tenancy", "sqldb-is-the-database"},
		{"pkg/tenancy/tenancydb/a.go", module + "/pkg/content", "tenancy-store-knows-no-content"},
		{"pkg/tenancy/tenancydb/b.go", module + "/pkg/auth", "tenancy-store-knows-no-content"},
		{"pkg/tenancy/tenancydb/c.go", module + "/pkg/sqldb", ""},
		{"pkg/content/contentdb/a.go", module + "/pkg/tenancy/tenancydb", ""},
		{"pkg/auth/b.go", module + "/pkg/content", "auth-knows-tenants-not-content"},
		{"pkg/auth/c.go", module + "/pkg/pipeline/event", "auth-knows-tenants-not-content"},
		{"pkg/auth/a.go", module + "/internal/devpostgres", "product-links-only-product"},
		{"schemas/openapi/a.go", module + "/dev/test", "product-links-only-product"},
		{"cmd/api/a.go", module + "/deploy/faults", "product-links-only-product"},
		{"cmd/api/b.go", module + "/pkg/pipeline/chstore", ""},
		{"cmd/api/c.go", module + "/schemas/clickhouse", ""},
		{"cmd/api/a_test.go", module + "/internal/devpostgres", ""},
		{"internal/devpostgres/a.go", module + "/dev/test", ""},
	}

	dir := t.TempDir()
	config, err := os.ReadFile("../../.golangci.yml")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, ".golangci.yml", string(config))
	// The third-party modules are stand-ins in directories of their own,
	// so that nothing is downloaded.
	write(t, dir, "go.mod", "module "+module+"\n\ngo 1.26\n\n"+
		"require (\n\tgithub.com/ClickHouse/clickhouse-go/v2 v2.0.0\n\tgithub.com/segmentio/kafka-go v0.4.0\n)\n\n"+
		"replace github.com/ClickHouse/clickhouse-go/v2 => ./third/clickhouse-go\n\n"+
		"replace github.com/segmentio/kafka-go => ./third/kafka-go\n")
	write(t, dir, "third/clickhouse-go/go.mod", "module github.com/ClickHouse/clickhouse-go/v2\n\ngo 1.26\n")
	write(t, dir, "third/clickhouse-go/a.go", "// Package clickhouse stands in for the driver.\npackage clickhouse\n")
	write(t, dir, "third/kafka-go/go.mod", "module github.com/segmentio/kafka-go\n\ngo 1.26\n")
	write(t, dir, "third/kafka-go/a.go", "// Package kafka stands in for the client.\npackage kafka\n")
	stubs := map[string]bool{}
	for _, c := range cases {
		name := packageName(path.Dir(c.file))
		if strings.HasPrefix(c.file, "cmd/") {
			name = "main"
		}
		// Each file uses its import, so that the module builds.
		write(t, dir, c.file, fmt.Sprintf("package %s\n\nimport _ %q\n", name, c.imports))
		if rel, ok := strings.CutPrefix(c.imports, module+"/"); ok && !stubs[rel] {
			stubs[rel] = true
			write(t, dir, rel+"/stub.go", "package "+packageName(rel)+"\n")
		}
	}

	reportFile := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.CommandContext(ctx, bin, "run", "--enable-only", "depguard", "--path-mode", "abs",
		"--output.json.path", reportFile, "--output.text.path", "stdout", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOPROXY=off")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	err = cmd.Run()
	// Exit status 1 means issues were found; anything else is a failure
	// to run.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("golangci-lint: %v\n%s", err, output.Bytes())
	}
	js, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("golangci-lint wrote no report: %v\n%s", err, output.Bytes())
	}
	var report struct {
		Issues []struct {
			FromLinter, Text string
			Pos              struct{ Filename string }
		}
	}
	if err := json.Unmarshal(js, &report); err != nil {
		t.Fatalf("read golangci-lint's report: %v\n%s", err, js)
	}
	found := map[string]string{} // file → the rule reported
	for _, is := range report.Issues {
		rel, err := filepath.Rel(dir, is.Pos.Filename)
		if err != nil || is.FromLinter != "depguard" {
			t.Errorf("unexpected finding: %+v", is)
			continue
		}
		found[filepath.ToSlash(rel)] += is.Text
	}
	for _, c := range cases {
		got := found[c.file]
		switch {
		case c.rule == "" && got != "":
			t.Errorf("%s importing %s: reported, though the layering allows it: %s", c.file, c.imports, got)
		case c.rule != "" && !strings.Contains(got, "'"+c.imports+"' is not allowed from list '"+c.rule+"'"):
			t.Errorf("%s importing %s: want a finding of rule %s, got %q", c.file, c.imports, c.rule, got)
		}
	}
	if t.Failed() {
		t.Logf("golangci-lint's output:\n%s", output.Bytes())
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// packageName is the last element of a directory, as a package name.
func packageName(dir string) string {
	return strings.ReplaceAll(path.Base(dir), "-", "")
}
