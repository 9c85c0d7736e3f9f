package loadgen

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	cases := []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "42 (ingest) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 1 1 18446744073709551615",
			3 * time.Second, false},
		{"name with spaces and parens", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1",
			30 * time.Millisecond, false},
		{"no name", "7 R 1", 0, true},
		{"short", "7 (x) R 1 2 3", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\tingest\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n")
	cases := []struct {
		key  string
		want int64
		ok   bool
	}{
		{"VmHWM:", 2 << 20, true},
		{"VmRSS:", 1 << 20, true},
		{"VmSwap:", 0, false},
	}
	for _, tc := range cases {
		got, ok := statusKB(status, tc.key)
		if got != tc.want || ok != tc.ok {
			t.Errorf("statusKB(%s) = %d, %v; want %d, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	if s.PeakRSS <= 0 || s.RSS <= 0 || s.PeakRSS < s.RSS {
		t.Errorf("implausible sample %+v", s)
	}
	m, err := StartMeter(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged some CPU time (it counts in ticks).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if now, err := ReadProc(os.Getpid()); err == nil && now.CPU > s.CPU+20*time.Millisecond {
			break
		}
	}
	u, err := m.Stop(1000)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds <= 0 || u.PeakRSS <= 0 || math.Abs(u.CPUPer100k-u.CPUSeconds*100) > 1e-9 {
		t.Errorf("implausible usage %+v", u)
	}
}
