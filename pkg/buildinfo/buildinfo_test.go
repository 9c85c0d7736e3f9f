package buildinfo

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestRevisionOf(t *testing.T) {
	vcs := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const full = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"stamped wins", "abc1234", vcs("vcs.revision", full), true, "abc1234"},
		{"the toolchain's, shortened", Unknown, vcs("vcs.revision", full, "vcs.modified", "false"), true, "0123456789ab"},
		{"the toolchain's, with changes", Unknown, vcs("vcs.revision", full, "vcs.modified", "true"), true, "0123456789ab-dirty"},
		{"empty stamp reads the toolchain's", "", vcs("vcs.revision", "abc"), true, "abc"},
		{"no vcs settings", Unknown, vcs("-trimpath", "true"), true, Unknown},
		{"no build information", Unknown, nil, false, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revisionOf(tc.stamped, tc.info, tc.ok); got != tc.want {
				t.Errorf("revisionOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		program string
		want    string
	}{
		// A test binary is not linked by deploy/build: the defaults.
		{"ingest", `^ingest dev \(revision [^ ,]+, ` + regexp.QuoteMeta(runtime.Version()) + `\)$`},
		{"api", `^api dev \(revision [^ ,]+, go`},
	} {
		if got := String(tc.program); !regexp.MustCompile(tc.want).MatchString(got) {
			t.Errorf("String(%q) = %q, want it to match %s", tc.program, got, tc.want)
		}
	}
	if Version() != "dev" || GoVersion() != runtime.Version() {
		t.Errorf("Version %q, GoVersion %q; want dev and %s", Version(), GoVersion(), runtime.Version())
	}
}
