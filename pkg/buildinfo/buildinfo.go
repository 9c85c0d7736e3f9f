// Package buildinfo says which build of the product is running: its
// version and revision, stamped at link time by deploy/build, and the Go
// version it was built with. Every binary prints them for -version, logs
// them at start and exports them as the cms_build_info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time, for example
//
//	-ldflags '-X github.com/assistantcms/cms/pkg/buildinfo.version=0.19.0
//	          -X github.com/assistantcms/cms/pkg/buildinfo.revision=abc1234'
//
// Unexported so that only the linker writes them.
var (
	version  = "dev"
	revision = "unknown"
)

// Unknown is the revision of a build that neither the linker nor the Go
// toolchain's version control stamp names.
const Unknown = "unknown"

// Version is the release version, "dev" for a build not made by
// deploy/build.
func Version() string { return version }

// Revision is the source revision: the one stamped at link time, else the
// one the Go toolchain recorded (go build in a checkout), else "unknown".
func Revision() string {
	info, ok := debug.ReadBuildInfo()
	return revisionOf(revision, info, ok)
}

// GoVersion is the version of Go the binary was built with.
func GoVersion() string { return runtime.Version() }

// String is the line -version prints, such as
// "ingest 0.19.0 (revision abc1234, go1.26.8)".
func String(program string) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", program, Version(), Revision(), GoVersion())
}

// revisionOf picks the revision from the stamped value and the
// toolchain's build information.
func revisionOf(stamped string, info *debug.BuildInfo, ok bool) string {
	if stamped != "" && stamped != Unknown {
		return stamped
	}
	if !ok || info == nil {
		return Unknown
	}
	var rev string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return Unknown
	}
	// As short as deploy/build's git rev-parse --short, give or take:
	// enough to find the commit.
	rev = rev[:min(len(rev), 12)]
	if modified {
		// Uncommitted changes: the commit alone does not say what ran.
		rev += "-dirty"
	}
	return rev
}
