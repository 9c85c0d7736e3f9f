package openapi_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/schemas/openapi"
)

var updateBundle = flag.Bool("update-bundle", false, "rewrite "+openapi.BundledFile+" from openapi.yaml and schemas/events")

// bundle inlines every schema file src references (directly or through
// other files) under components.schemas, named "events.<file stem>", and
// points the references at them. $id and $schema are dropped from the
// inlined schemas: an $id would make references inside them resolve
// against the schema's own URI rather than the document.
func bundle(src string) ([]byte, error) {
	raw, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", src, err)
	}
	b := &bundler{inlined: map[string]*yaml.Node{}}
	if err := b.rewrite(&doc, filepath.Dir(src), ""); err != nil {
		return nil, err
	}
	block(&doc, false)
	schemas := lookup(lookup(doc.Content[0], "components"), "schemas")
	if schemas == nil {
		return nil, fmt.Errorf("%s has no components.schemas", src)
	}
	for _, name := range b.order {
		schemas.Content = append(schemas.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, b.inlined[name])
	}
	var out bytes.Buffer
	out.WriteString("# Generated from openapi.yaml and schemas/events by go test ./schemas/openapi -run Bundle -update-bundle; do not edit.\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode the bundle: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode the bundle: %w", err)
	}
	return out.Bytes(), nil
}

type bundler struct {
	inlined map[string]*yaml.Node
	order   []string
}

// rewrite points the references under n at the document; dir is the
// directory of the file n comes from, and component the name n is
// inlined under ("" for the document itself).
func (b *bundler) rewrite(n *yaml.Node, dir, component string) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value != "$ref" || v.Kind != yaml.ScalarNode {
				continue
			}
			ref, err := b.resolve(v.Value, dir, component)
			if err != nil {
				return err
			}
			v.Value, v.Style = ref, yaml.DoubleQuotedStyle
		}
	}
	for _, c := range n.Content {
		if err := b.rewrite(c, dir, component); err != nil {
			return err
		}
	}
	return nil
}

// resolve returns the document pointer for ref, inlining the file it
// names when it names one.
func (b *bundler) resolve(ref, dir, component string) (string, error) {
	file, frag, _ := strings.Cut(ref, "#")
	if file == "" {
		if component == "" {
			return ref, nil
		}
		return "#/components/schemas/" + component + frag, nil
	}
	p := filepath.Join(dir, filepath.FromSlash(file))
	name := "events." + strings.TrimSuffix(path.Base(file), ".schema.json")
	if _, ok := b.inlined[name]; !ok {
		raw, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		var n yaml.Node
		if err := yaml.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("parse %s: %w", p, err)
		}
		root := n.Content[0]
		drop(root, "$id", "$schema")
		block(root, true)
		// Claimed before rewriting, so that files referencing each other
		// are inlined once.
		b.inlined[name] = root
		b.order = append(b.order, name)
		if err := b.rewrite(root, filepath.Dir(p), name); err != nil {
			return "", err
		}
	}
	return "#/components/schemas/" + name + frag, nil
}

// block writes n in YAML's block style, as the rest of the document is;
// with scalars, the JSON quoting of strings goes too (the encoder quotes
// what needs it).
func block(n *yaml.Node, scalars bool) {
	if n.Kind != yaml.ScalarNode || scalars {
		n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		block(c, scalars)
	}
}

// lookup returns the value of key in mapping n, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// drop removes keys from mapping n.
func drop(n *yaml.Node, keys ...string) {
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if slices.Contains(keys, n.Content[i].Value) {
			continue
		}
		kept = append(kept, n.Content[i], n.Content[i+1])
	}
	n.Content = kept
}

// TestBundleUpToDate keeps the served document equal to its sources.
func TestBundleUpToDate(t *testing.T) {
	got, err := bundle("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *updateBundle {
		if err := os.WriteFile(openapi.BundledFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(openapi.BundledFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not openapi.yaml bundled with schemas/events; run go test ./schemas/openapi -run Bundle -update-bundle and review the diff", openapi.BundledFile)
	}
}
