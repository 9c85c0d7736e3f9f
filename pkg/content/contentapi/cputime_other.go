//go:build !linux

package contentapi

import "time"

// threadCPU cannot be read here: work is measured by the clock.
func threadCPU() (time.Duration, bool) { return 0, false }
