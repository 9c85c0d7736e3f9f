package encoder

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLocate(t *testing.T) {
	root := t.TempDir()
	system, user, empty := filepath.Join(root, "system"), filepath.Join(root, "user"), filepath.Join(root, "empty")
	for _, d := range []string{system, user} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, modelFile), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		want string
	}{
		{"the machine's installation first", []string{system, user}, system},
		{"the user's when the machine has none", []string{empty, user}, user},
		{"a missing directory is passed over", []string{filepath.Join(root, "none"), user}, user},
		{"the first when none holds a model, for its error", []string{empty, filepath.Join(root, "none")}, empty},
	} {
		if got := locate(tc.dirs); got != tc.want {
			t.Errorf("%s: locate(%v) = %s, want %s", tc.name, tc.dirs, got, tc.want)
		}
	}
}

func TestUserDirFollowsXDGCacheHome(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	got, err := UserDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "cms", "encoder"); got != want {
		t.Errorf("UserDir() = %s, want %s", got, want)
	}
	_, searched := Locate()
	if len(searched) != 2 || searched[0] != DefaultDir || searched[1] != got {
		t.Errorf("Locate searched %v, want [%s %s]", searched, DefaultDir, got)
	}
}
