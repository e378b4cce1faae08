// Package measure reads what the kernel knows about this process: resource
// usage, resident memory, thread count and CPU affinity, plus a sampler that
// follows resident memory over a trial.
package measure

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Usage is a getrusage(RUSAGE_SELF) snapshot plus the resident high-water
// mark. The Go runner starts no child processes, so RUSAGE_CHILDREN would
// always be zero.
type Usage struct {
	User, System           time.Duration
	MaxRSSBytes            int64
	Voluntary, Involuntary int64
}

// ReadUsage returns the process's resource usage so far.
func ReadUsage() (Usage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, err
	}
	return Usage{
		User:        time.Duration(ru.Utime.Nano()),
		System:      time.Duration(ru.Stime.Nano()),
		MaxRSSBytes: PeakRSS(),
		Voluntary:   ru.Nvcsw,
		Involuntary: ru.Nivcsw,
	}, nil
}

// Sub returns the CPU time and context switches spent between earlier and u.
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{
		User:        u.User - earlier.User,
		System:      u.System - earlier.System,
		MaxRSSBytes: u.MaxRSSBytes,
		Voluntary:   u.Voluntary - earlier.Voluntary,
		Involuntary: u.Involuntary - earlier.Involuntary,
	}
}

var pageSize = int64(os.Getpagesize())

// RSS returns resident memory now, from /proc/self/statm (cheaper than status).
func RSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, errors.New("measure: short /proc/self/statm")
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * pageSize, nil
}

// PeakRSS returns the kernel's resident high-water mark (VmHWM), 0 if unknown.
// Not getrusage's ru_maxrss: that survives exec, so a runner started from a
// larger parent (the Python driver) would report the parent's peak.
func PeakRSS() int64 {
	return statusBytes("VmHWM:")
}

// PeakVM returns the kernel's virtual-memory high-water mark (VmPeak), 0 if
// unknown: address space reserved, touched or not.
func PeakVM() int64 {
	return statusBytes("VmPeak:")
}

// statusBytes reads a kB line of /proc/self/status in bytes, 0 if unknown.
func statusBytes(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	kib, err := statusField(b, name)
	if err != nil {
		return 0
	}
	return kib * 1024
}

// Threads returns the number of OS threads now, from /proc/self/status.
func Threads() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return parseThreads(b)
}

func parseThreads(status []byte) (int64, error) {
	return statusField(status, "Threads:")
}

// statusField reads the leading number of a /proc/PID/status line.
func statusField(status []byte, name string) (int64, error) {
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte(name)); ok {
			number, _, _ := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
			return strconv.ParseInt(string(number), 10, 64)
		}
	}
	return 0, errors.New("measure: no " + name + " line in /proc/self/status")
}

// CPUs returns the CPUs this process may run on, ascending.
func CPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for i := range 1024 { // CPU_SETSIZE: all a CPUSet can hold
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}
