// Package k8sbuild builds the Kubernetes manifests of deploy/k8s in
// process, for the tests that check them.
package k8sbuild

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Resource is one object of a build.
type Resource struct {
	Kind, ID string
	YAML     []byte
}

// Build runs kustomize on dir (relative to root) over an in-memory copy
// of root. A file with an .example beside it is the operator's own
// (git-ignored): the example stands in its place, so a developer's real
// secrets are never read and overlays that generate a Secret build
// without one. edit, when not nil, may change each file on the way (its
// path is relative to root, with slashes).
func Build(root, dir string, edit func(path string, b []byte) []byte) ([]Resource, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		if _, err := os.Stat(p + ".example"); err == nil {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if edit != nil {
			b = edit(rel, b)
		}
		if err := mem.WriteFile("/"+strings.TrimSuffix(rel, ".example"), b); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy the manifests: %w", err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []Resource
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		out = append(out, Resource{Kind: r.GetKind(), ID: r.CurId().String(), YAML: b})
	}
	return out, nil
}
