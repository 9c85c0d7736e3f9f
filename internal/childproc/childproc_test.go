package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestStopAndKill(t *testing.T) {
	cases := []struct {
		name    string
		script  string
		wantErr string
	}{
		{"stops on SIGTERM", `touch "$READY"; sleep 30`, ""},
		{"killed when SIGTERM is ignored", `trap '' TERM; touch "$READY"; sleep 30 & wait`, "did not stop within"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ready := filepath.Join(t.TempDir(), "ready")
			cmd := exec.Command("sh", "-c", tc.script)
			cmd.Env = append(os.Environ(), "READY="+ready)
			p, err := Start("child", cmd)
			if err != nil {
				t.Fatal(err)
			}
			// The shell signals with a file that its trap is in place.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("child never became ready")
				}
			}
			err = p.Stop(syscall.SIGTERM, 500*time.Millisecond)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Stop = %v, want %q", err, tc.wantErr)
			}
			select {
			case <-p.Done():
			default:
				t.Error("process still running after Stop")
			}
		})
	}
}

func TestOutputTakesConcurrentWriters(t *testing.T) {
	var o Output
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&o, "line\n")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(o.String(), "line\n"); n != 800 {
		t.Errorf("%d lines, want 800", n)
	}
}
