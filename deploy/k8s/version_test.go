package k8s_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageTagIsTheVersion checks that each deployable kustomization runs
// the image of the version deploy/build stamps into the binaries (VERSION),
// so that the tag, -version, the start log and cms_build_info agree.
func TestImageTagIsTheVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	if version == "" {
		t.Fatal("VERSION is empty")
	}
	n := 0
	for _, k := range kustomizations() {
		if !k.deployable {
			continue
		}
		n++
		t.Run(k.name, func(t *testing.T) {
			ref, pinned, err := kustomizationImage(k.dir, image)
			if err != nil {
				t.Fatal(err)
			}
			// A digest may follow the tag: it pins the same image further.
			tagged, _, _ := strings.Cut(ref, "@")
			if want := image + ":" + version; !pinned || tagged != want {
				t.Errorf("%s/kustomization.yaml gives %s the reference %q; want %q, the version in VERSION", k.dir, image, ref, want)
			}
		})
	}
	if n == 0 {
		t.Error("no deployable kustomization to check")
	}
}
