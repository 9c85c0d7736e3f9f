package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebianMirror checks that the images' Debian base is bootstrapped
// from the machine's own apt sources, in either of apt's formats, or from
// DEBIAN_MIRROR, and that a machine with neither is told what to set.
func TestDebianMirror(t *testing.T) {
	script, err := filepath.Abs("containers/testdata/standins/debian-mirror")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		override string
		want     string
		wantErr  string
	}{
		{name: "deb822, comments between fields, security and updates before main",
			files: map[string]string{"sources.list.d/debian.sources": `Types: deb
# a snapshot, once
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
`},
			want: "http://mirror.example/debian"},
		{name: "one-line with options, deb-src and other suites passed over",
			files: map[string]string{"sources.list": `# the machine's
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian.gpg] http://mirror.example/debian bookworm-updates main
deb [arch=amd64] http://proxy.example:3142/debian bookworm contrib main
`},
			want: "http://proxy.example:3142/debian"},
		{name: "a disc is no mirror, and neither is a disabled source",
			files: map[string]string{
				"sources.list": "deb cdrom:[Debian GNU/Linux 12.5.0 _Bookworm_ - Official amd64 DVD Binary-1]/ bookworm contrib main\n",
				"sources.list.d/debian.sources": `Types: deb
URIs: http://off.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb
URIs: https://on.example/debian
Suites: bookworm
Components: main
`},
			want: "https://on.example/debian"},
		{name: "a .list file in sources.list.d",
			files: map[string]string{"sources.list.d/local.list": "deb http://local.example/debian bookworm main\n"},
			want:  "http://local.example/debian"},
		{name: "the override wins",
			files:    map[string]string{"sources.list": "deb http://mirror.example/debian bookworm main\n"},
			override: "http://override.example/debian", want: "http://override.example/debian"},
		{name: "no bookworm source",
			files:   map[string]string{"sources.list": "deb http://archive.example/ubuntu noble main\n"},
			wantErr: "set DEBIAN_MIRROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etc := t.TempDir()
			if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(t.Context(), script)
			cmd.Env = append(os.Environ(), "APT_ETC="+etc, "DEBIAN_MIRROR="+tc.override)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			got := strings.TrimSpace(string(out))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(stderr.String(), tc.wantErr) {
					t.Fatalf("printed %q (%v, %q); want a failure saying %q", got, err, stderr.String(), tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("printed %q (%v, %q); want %q", got, err, stderr.String(), tc.want)
			}
		})
	}
}
