package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports; the kernel keeps it fixed
// for user space whatever CONFIG_HZ is.
const clockTicks = 100

// ProcSample is one reading of a process's resource use.
type ProcSample struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// PeakRSS is VmHWM: the largest resident set since start or since the
	// last ResetPeakRSS, in bytes.
	PeakRSS int64
	// RSS is the resident set now, in bytes.
	RSS int64
}

// ReadProc samples process pid from /proc.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcSample{}, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return ProcSample{}, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ProcSample{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	s := ProcSample{CPU: cpu}
	s.PeakRSS, _ = statusKB(status, "VmHWM:")
	s.RSS, _ = statusKB(status, "VmRSS:")
	return s, nil
}

// parseStatCPU returns utime+stime from the text of /proc/PID/stat. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("malformed /proc stat line: no ')'")
	}
	// After ')' come fields 3 (state) onwards; utime and stime are 14, 15.
	f := bytes.Fields(stat[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat line: %d fields after the name", len(f))
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// statusKB reads a "Key:   123 kB" line of /proc/PID/status, in bytes.
func statusKB(status []byte, key string) (int64, bool) {
	i := bytes.Index(status, []byte("\n"+key))
	if i < 0 {
		return 0, false
	}
	line := status[i+1+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0, false
	}
	kb, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	return kb << 10, true
}

// ResetPeakRSS sets the process's VmHWM back to its current RSS, so that
// the next sample reports the peak of one phase rather than since start.
func ResetPeakRSS(pid int) error {
	// "5" resets the peak resident set size (Linux 4.0 and later).
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of process %d: %w", pid, err)
	}
	return nil
}

// Usage is one process's resource use over a run.
type Usage struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPer100k is CPUSeconds per 100,000 events of the run.
	CPUPer100k float64 `json:"cpu_seconds_per_100k_events"`
	PeakRSS    int64   `json:"peak_rss_bytes"`
}

// Meter measures a process between Start and Stop.
type Meter struct {
	pid    int
	before ProcSample
}

// StartMeter samples pid and resets its peak RSS, so that the peak Stop
// reports is that of the run. A failed reset leaves the peak since start.
func StartMeter(pid int) (*Meter, error) {
	_ = ResetPeakRSS(pid)
	s, err := ReadProc(pid)
	if err != nil {
		return nil, err
	}
	return &Meter{pid: pid, before: s}, nil
}

// Stop samples the process again and returns its use for events events.
func (m *Meter) Stop(events int64) (*Usage, error) {
	s, err := ReadProc(m.pid)
	if err != nil {
		return nil, err
	}
	cpu := s.CPU - m.before.CPU
	return &Usage{PID: m.pid, CPUSeconds: cpu.Seconds(), CPUPer100k: CPUPer100k(cpu, events), PeakRSS: s.PeakRSS}, nil
}

// Result is what the loadgen command prints with -json: the run, and the
// resource use of the measured process and of the generator itself (in
// ceiling mode the generator is the producing process).
type Result struct {
	Report *Report `json:"report"`
	Target *Usage  `json:"target,omitempty"`
	Self   *Usage  `json:"self,omitempty"`
}
