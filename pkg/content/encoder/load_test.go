package encoder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyModel lays out a model directory in t.TempDir: shards are linked to
// the real ones unless edit changes them.
func copyModel(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// rewriteJSON replaces dir/name by edit applied to its decoded JSON.
func rewriteJSON(t *testing.T, dir, name string, edit func(v any) any) {
	t.Helper()
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(edit(v))
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, out)
}

func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// manifestWeight returns the manifest entry of the weight named name.
func manifestWeight(t *testing.T, v any, name string) map[string]any {
	t.Helper()
	for _, g := range v.(map[string]any)["weightsManifest"].([]any) {
		for _, w := range g.(map[string]any)["weights"].([]any) {
			if w.(map[string]any)["name"] == name {
				return w.(map[string]any)
			}
		}
	}
	t.Fatalf("no weight %s in the manifest", name)
	return nil
}

func TestLoadErrors(t *testing.T) {
	src := testDir(t)
	const embName = "module/Embeddings_en"
	tests := []struct {
		name string
		edit func(t *testing.T, dir string)
		want []string // substrings of the error
	}{
		{"missing model.json", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, modelFile))
		}, []string{modelFile, "no such file"}},
		{"corrupt model.json", func(t *testing.T, dir string) {
			replaceFile(t, filepath.Join(dir, modelFile), []byte(`{"modelTopology": {"node": [`))
		}, []string{modelFile, "corrupt JSON"}},
		{"missing vocab.json", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, vocabFile))
		}, []string{vocabFile, "no such file"}},
		{"corrupt vocab.json", func(t *testing.T, dir string) {
			replaceFile(t, filepath.Join(dir, vocabFile), []byte(`[["a", -1], ["b"`))
		}, []string{vocabFile, "corrupt JSON"}},
		{"vocab entry not a pair", func(t *testing.T, dir string) {
			replaceFile(t, filepath.Join(dir, vocabFile), []byte(`[["a", -1], ["b", -2, 3]]`))
		}, []string{vocabFile, "entry 1"}},
		{"vocab score not a number", func(t *testing.T, dir string) {
			replaceFile(t, filepath.Join(dir, vocabFile), []byte(`[["a", -1], ["b", "x"]]`))
		}, []string{vocabFile, "entry 1", "score"}},
		{"missing shard", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "group1-shard3of7"))
		}, []string{"group1-shard3of7", "no such file"}},
		{"short shard", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "group1-shard7of7")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			replaceFile(t, path, b[:len(b)-4])
		}, []string{"group1-shard7of7 2737828", "manifest needs 27903656"}},
		{"NaN weight", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "group1-shard1of7")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			copy(b[8:], []byte{0, 0, 0xc0, 0x7f}) // the third float of the first weight
			replaceFile(t, path, b)
		}, []string{"Layer_1/TransformerLayer/FFN/conv2/Tensordot/Reshape_1", "row 0", "non-finite value at 2"}},
		{"one weight changed", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "group1-shard4of7")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[1000] ^= 1 // a finite float stays finite
			replaceFile(t, path, b)
		}, []string{"group1-shard4of7", "sha256", "damaged"}},
		{"unexpected shape", func(t *testing.T, dir string) {
			rewriteJSON(t, dir, modelFile, func(v any) any {
				w := manifestWeight(t, v, embName)
				w["shape"] = []any{8002.0, 128.0, 2.0}
				return v
			})
		}, []string{modelFile, embName, "shape [8002,128,2], want [8002,256]"}},
		{"renamed weight", func(t *testing.T, dir string) {
			rewriteJSON(t, dir, modelFile, func(v any) any {
				manifestWeight(t, v, embName)["name"] = "module/Embeddings_fr"
				return v
			})
		}, []string{modelFile, "no weight " + embName}},
		{"quantized weight", func(t *testing.T, dir string) {
			rewriteJSON(t, dir, modelFile, func(v any) any {
				manifestWeight(t, v, embName)["quantization"] = map[string]any{"dtype": "uint8"}
				return v
			})
		}, []string{modelFile, embName, "quantized"}},
		{"shard path outside the directory", func(t *testing.T, dir string) {
			rewriteJSON(t, dir, modelFile, func(v any) any {
				g := v.(map[string]any)["weightsManifest"].([]any)[0].(map[string]any)
				g["paths"].([]any)[0] = "../../etc/passwd"
				return v
			})
		}, []string{modelFile, `"../../etc/passwd"`, "not a file name"}},
		{"another graph", func(t *testing.T, dir string) {
			rewriteJSON(t, dir, modelFile, func(v any) any {
				v.(map[string]any)["modelTopology"] = map[string]any{"node": []any{}}
				return v
			})
		}, []string{modelFile, "graph has no node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyModel(t, src)
			tt.edit(t, dir)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("intact copy loads", func(t *testing.T) {
		if _, err := Load(copyModel(t, src)); err != nil {
			t.Fatal(err)
		}
	})
}
