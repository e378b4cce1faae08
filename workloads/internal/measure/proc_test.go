package measure

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadings(t *testing.T) {
	rss, err := RSS()
	if err != nil || rss <= 0 {
		t.Fatalf("RSS() = %d, %v", rss, err)
	}
	n, err := Threads()
	if err != nil || n < 1 {
		t.Fatalf("Threads() = %d, %v", n, err)
	}
	cpus, err := CPUs()
	if err != nil || len(cpus) == 0 || !slices.IsSorted(cpus) {
		t.Fatalf("CPUs() = %v, %v", cpus, err)
	}
	u, err := ReadUsage()
	if err != nil || u.MaxRSSBytes < rss/2 {
		t.Fatalf("ReadUsage() = %+v, %v (rss %d)", u, err, rss)
	}
}

// Spins until the thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID, another kernel account
// than getrusage) has run 50ms, not for 50ms of wall time: on a busy machine that was 3ms of
// CPU. The process used at least what this thread did (less a little: getrusage splits its
// runtime into user and system by sampling).
func TestUsageCountsCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, _ := ReadUsage()
	start := threadCPU(t)
	for threadCPU(t)-start < 50*time.Millisecond {
	}
	used := must(ReadUsage()).Sub(before)
	if used.User+used.System < 40*time.Millisecond {
		t.Fatalf("50ms of the thread's CPU counted as %v", used.User+used.System)
	}
}

func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func must(u Usage, err error) Usage {
	if err != nil {
		panic(err)
	}
	return u
}

func TestParseThreads(t *testing.T) {
	n, err := parseThreads([]byte("Name:\tx\nThreads:\t12\nSigQ:\t0/1\n"))
	if err != nil || n != 12 {
		t.Fatalf("got %d, %v", n, err)
	}
	if _, err := parseThreads([]byte("Name:\tx\n")); err == nil {
		t.Fatal("no error without a Threads line")
	}
}

func TestSampler(t *testing.T) {
	baseline, _ := RSS()
	start := time.Now()
	s := StartSampler(start, baseline, 20*time.Millisecond, 64)
	// Memory outside the Go heap, so earlier tests' garbage cannot hide it.
	ballast, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ballast)
	for i := 0; i < len(ballast); i += 4096 { // touch every page so it becomes resident
		ballast[i] = 1
	}
	time.Sleep(200 * time.Millisecond)
	got := s.Stop()
	elapsed := time.Since(start)
	if got.Timeline.Samples[0] != baseline {
		t.Errorf("first sample %d, want the baseline %d", got.Timeline.Samples[0], baseline)
	}
	// Samples are due every interval; the sampler must not fall far behind.
	if want := int(elapsed/got.Timeline.Interval) - 1; len(got.Timeline.Samples) < want {
		t.Errorf("%d samples over %v at %v, want at least %d", len(got.Timeline.Samples), elapsed, got.Timeline.Interval, want)
	}
	if got.PeakRSS < baseline+32<<20 {
		t.Errorf("peak RSS %d does not show 64 MiB over baseline %d", got.PeakRSS, baseline)
	}
	if got.PeakThreads < 1 {
		t.Errorf("peak threads %d", got.PeakThreads)
	}
}

func TestPeakRSSIsTheHighWaterMarkOfThisProgram(t *testing.T) {
	peak := PeakRSS()
	now, err := RSS()
	if err != nil {
		t.Fatal(err)
	}
	if peak < now || peak <= 0 {
		t.Fatalf("PeakRSS() = %d, want >= current RSS %d", peak, now)
	}
}
