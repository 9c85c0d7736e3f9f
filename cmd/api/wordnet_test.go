package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/content/lexicon"
)

// TestLoadWordNet: the default directory is read when there, "off" turns
// WordNet off, and a directory set by hand must hold the database.
func TestLoadWordNet(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "wordnet")
	for _, tc := range []struct {
		dir     string
		loaded  bool
		wantErr string
	}{
		{lexicon.DefaultDir, true, ""},
		{"off", false, ""},
		{"", false, ""},
		{missing, false, "WORDNET_DIR"},
		{t.TempDir(), false, "data.noun"},
	} {
		wn, err := loadWordNet(tc.dir)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one naming %s", tc.dir, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.dir, err)
		case (wn != nil) != tc.loaded:
			t.Errorf("%q: loaded %v, want %v", tc.dir, wn != nil, tc.loaded)
		}
	}
}
