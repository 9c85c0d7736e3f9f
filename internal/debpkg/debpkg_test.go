package debpkg

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	for _, tt := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"sh"}, true},
		{[]string{"no-such-command-here", "sh"}, true},
		{[]string{"no-such-command-here"}, false},
	} {
		p, err := Find(tt.names...)
		if (err == nil) != tt.ok || (tt.ok && !strings.HasSuffix(p, "/sh")) {
			t.Errorf("Find(%v) = %q, %v", tt.names, p, err)
		}
	}
}

func TestEnsureFindsInstalledWithoutApt(t *testing.T) {
	// sh is there, so no package is installed (the name would fail).
	if p, err := Ensure(context.Background(), io.Discard, []string{"sh"}, "no-such-package-name"); err != nil || p == "" {
		t.Errorf("Ensure = %q, %v", p, err)
	}
}

func TestEnsureFoundUsesTheFinder(t *testing.T) {
	calls := 0
	find := func() (string, error) { calls++; return "/opt/x/bin/tool", nil }
	// The finder says the command is there, so apt is not run (the
	// package name would fail).
	if p, err := EnsureFound(context.Background(), io.Discard, find, "no-such-package-name"); err != nil || p != "/opt/x/bin/tool" || calls != 1 {
		t.Errorf("EnsureFound = %q, %v after %d calls", p, err, calls)
	}
}
