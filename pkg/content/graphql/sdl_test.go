package graphql

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"testing"
)

var updateSDL = flag.Bool("update-sdl", false, "rewrite schemas/graphql/schema.graphql from the served schema")

const sdlFile = "../../../schemas/graphql/schema.graphql"

// TestSchemaFile holds the served schema to the committed SDL: any change
// to the API shows in the file, and so in review.
func TestSchemaFile(t *testing.T) {
	h, err := New(Limits{}, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.sdl(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if *updateSDL {
		if err := os.WriteFile(sdlFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(sdlFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the served schema differs from %s (run go test ./pkg/content/graphql -run SchemaFile -update-sdl to rewrite it, then review the diff):\n%s", sdlFile, got)
	}
}
