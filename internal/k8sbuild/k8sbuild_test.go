package k8sbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("base/kustomization.yaml", "resources: [cm.yaml]\n")
	write("base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: real}\n")
	// The operator's own file is never read: its example stands in.
	write("base/cm.yaml.example", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: example}\n")
	write("base/build.go", "package never_read\n")

	res, err := Build(root, "base", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Kind != "ConfigMap" || !strings.Contains(string(res[0].YAML), "mode: example") {
		t.Fatalf("built %+v", res)
	}
	res, err = Build(root, "base", func(p string, b []byte) []byte {
		if p == "base/cm.yaml.example" {
			return []byte(strings.Replace(string(b), "example", "edited", 1))
		}
		return b
	})
	if err != nil || len(res) != 1 || !strings.Contains(string(res[0].YAML), "mode: edited") {
		t.Fatalf("edited build %+v, %v", res, err)
	}
	if _, err := Build(root, "missing", nil); err == nil {
		t.Error("a missing kustomization built")
	}
}
