package childproc

import (
	"fmt"
	"net"
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

func TestSlotHoldsOneRestartableProcess(t *testing.T) {
	var s Slot
	if s.Running() || s.PID() != 0 {
		t.Fatalf("zero Slot: running %v, PID %d; want none", s.Running(), s.PID())
	}
	if err := s.Signal(syscall.SIGTERM, time.Second); err != nil {
		t.Fatalf("Signal on an empty slot: %v", err)
	}
	for round := range 2 {
		p, err := Start("sleep", exec.Command("sleep", "30"))
		if err != nil {
			t.Fatal(err)
		}
		s.Set(p)
		if !s.Running() || s.PID() != p.PID() {
			t.Fatalf("round %d: running %v, PID %d; want the process %d", round, s.Running(), s.PID(), p.PID())
		}
		if err := s.Signal(syscall.SIGTERM, 10*time.Second); err != nil {
			t.Fatalf("round %d: stop: %v", round, err)
		}
		select {
		case <-p.Done():
		default:
			t.Fatalf("round %d: Signal returned before the process exited", round)
		}
		if s.Running() || s.PID() != 0 {
			t.Fatalf("round %d: slot still holds a process after Signal", round)
		}
	}
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("listen on the port found free: %v", err)
	}
	l.Close()
}
