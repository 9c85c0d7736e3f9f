package contentapi

import (
	"runtime"
	"testing"
	"time"
)

// TestCPUTimeIsNotWaiting: work is charged the CPU it used, not the time
// it waited: a sleep costs next to nothing; busy work costs something,
// never more than the time it took (less when the machine is busy and
// it waited for a core meanwhile).
func TestCPUTimeIsNotWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a thread's CPU time is read on Linux; elsewhere work is timed by the clock")
	}
	if d := cpuTime(func() { time.Sleep(50 * time.Millisecond) }); d > 10*time.Millisecond {
		t.Errorf("sleeping 50 ms charged %v", d)
	}
	var sink int
	start := time.Now()
	d := cpuTime(func() {
		for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
			sink++
		}
	})
	if took := time.Since(start); d <= 0 || d > took {
		t.Errorf("%v of busy work charged %v", took, d)
	}
	_ = sink
}
