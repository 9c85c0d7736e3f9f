package contentapi

import (
	"runtime"
	"testing"
	"time"
)

// TestCPUTimeIsNotWaiting: work is charged the CPU it used, not the time
// it waited: a sleep costs next to nothing, a busy loop about its length.
func TestCPUTimeIsNotWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a thread's CPU time is read on Linux; elsewhere work is timed by the clock")
	}
	if d := cpuTime(func() { time.Sleep(50 * time.Millisecond) }); d > 10*time.Millisecond {
		t.Errorf("sleeping 50 ms charged %v", d)
	}
	var sink int
	d := cpuTime(func() {
		for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
			sink++
		}
	})
	// At least half of it: the loop may lose the core now and then.
	if d < 15*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("30 ms of work charged %v", d)
	}
	_ = sink
}
