package runner

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"cxlab.dev/workloads/internal/measure"
	"cxlab.dev/workloads/internal/metrics"
)

// Run runs the task phase of c, reporting progress to trial, and returns
// the Result. Only the task phase is timed and measured; it begins when the
// runner leaves the start barrier (at once without one).
func Run(c *Config, trial *metrics.Trial, barrier *startBarrier) (Result, error) {
	work, err := newTask(c)
	if err != nil {
		return Result{}, err
	}
	cpus, err := measure.CPUs()
	if err != nil {
		return Result{}, fmt.Errorf("reading CPU affinity: %w", err)
	}
	if _, err := measure.Threads(); err != nil {
		return Result{}, fmt.Errorf("reading thread count: %w", err)
	}
	// Indexed by task id, allocated up front: no locking and no growth while
	// tasks run, even for a million of them.
	durations := make([]time.Duration, c.Tasks)
	var errs errorTally
	// Offsets from one monotonic epoch: one clock read per timestamp, where
	// time.Now reads two clocks.
	epoch := time.Now()
	one := func(i int) {
		trial.TaskStarted(i)
		t0 := time.Since(epoch)
		err := work()
		d := time.Since(epoch) - t0
		trial.TaskFinished(i, d, err == nil)
		if err != nil {
			durations[i] = failedTask
			errs.add(errorMessage(err))
			return
		}
		durations[i] = d
	}

	baseline, err := measure.RSS()
	if err != nil {
		return Result{}, fmt.Errorf("reading resident memory: %w", err)
	}
	waited, err := barrier.wait()
	if err != nil {
		return Result{}, err
	}
	before, err := measure.ReadUsage()
	if err != nil {
		return Result{}, fmt.Errorf("getrusage: %w", err)
	}
	start := time.Now()
	trial.Begin(start)
	sampler := measure.StartSampler(start, baseline, measure.TimelineInterval, measure.TimelineSamples)

	runTasks(c.Tasks, c.Workers, c.ResolvedWorkers(), one)

	end := time.Now()
	after, err := measure.ReadUsage()
	trial.End(end)
	seen := sampler.Stop()
	if err != nil {
		return Result{}, fmt.Errorf("getrusage: %w", err)
	}

	wall := end.Sub(start).Seconds()
	used := after.Sub(before)
	ok, failed := trial.Counts()
	gomaxprocs := runtime.GOMAXPROCS(0)
	r := Result{
		Schema:                     Schema,
		Experiment:                 c.Experiment,
		Trial:                      c.Trial,
		Pods:                       1,
		PodIndex:                   &c.Pod,
		Model:                      c.Model,
		Workload:                   c.Workload,
		Workers:                    c.ResolvedWorkers(),
		WorkersStarted:             c.ResolvedWorkers(), // a goroutine start cannot be refused
		GOMAXPROCS:                 &gomaxprocs,
		Tasks:                      c.Tasks,
		TasksOK:                    ok,
		TasksFailed:                failed,
		WallSeconds:                wall,
		StartedAtUnixSeconds:       round6(float64(start.UnixNano()) / 1e9),
		BarrierWaitSeconds:         waited,
		CPUUserSeconds:             used.User.Seconds(),
		CPUSystemSeconds:           used.System.Seconds(),
		CPUPercent:                 ratio(100*(used.User+used.System).Seconds(), wall),
		PeakRSSBytes:               max(after.MaxRSSBytes, seen.PeakRSS),
		PeakVMBytes:                measure.PeakVM(),
		BaselineRSSBytes:           baseline,
		PeakThreads:                seen.PeakThreads,
		VoluntaryContextSwitches:   used.Voluntary,
		InvoluntaryContextSwitches: used.Involuntary,
		ThroughputPerSecond:        ratio(float64(ok), wall),
		LatencyHistogram:           buildHistogram(durations),
		LatencySeconds:             latencies(durations),
		RSSTimeline: RSSTimeline{
			IntervalSeconds: seen.Timeline.Interval.Seconds(),
			RSSBytes:        seen.Timeline.Samples,
		},
		CPUs:    cpus,
		Runtime: runtime.Version(),
		Errors:  errs.top(maxErrorKinds),
	}
	if c.Syscalls {
		r.Syscalls = &Syscalls{Unavailable: "the Go runner does not count system calls: run it under strace -c -f by hand"}
	}
	r.setParameters(c, wall)
	return r, nil
}

// setParameters fills the workload's own parameter and, where a floor
// exists, the floor and the efficiency against it; the rest stay null.
func (r *Result) setParameters(c *Config, wall float64) {
	var floor float64
	switch c.Workload {
	case "sleep", "http":
		rtt := c.RTT.Seconds()
		r.RTTSeconds = &rtt
		floor = Floor(c.Tasks, r.Workers, c.RTT).Seconds()
	case "hold":
		hold := c.Hold.Seconds()
		r.HoldSeconds = &hold
		floor = Floor(c.Tasks, r.Workers, c.Hold).Seconds()
	case "cpu":
		iterations := c.Iterations
		r.Iterations = &iterations
		return // no floor: the work is the CPU itself
	}
	efficiency := ratio(floor, wall)
	r.FloorSeconds = &floor
	r.Efficiency = &efficiency
}

// Floor is the fastest the trial could go: ceil(tasks/workers) rounds of d.
func Floor(tasks, workers int, d time.Duration) time.Duration {
	return time.Duration((tasks+workers-1)/workers) * d
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// runTasks runs tasks 0..n-1 through one: with workers == 0 each task gets
// its own goroutine, otherwise resolved goroutines pull task ids from a
// shared counter.
func runTasks(n, workers, resolved int, one func(int)) {
	var wg sync.WaitGroup
	if workers == 0 {
		wg.Add(n)
		for i := range n {
			go func() {
				defer finish(&wg)
				one(i)
			}()
		}
		wg.Wait()
		return
	}
	var next atomic.Int64
	wg.Add(resolved)
	for range resolved {
		go func() {
			defer finish(&wg)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				one(i)
			}
		}()
	}
	wg.Wait()
}

// finish ends a task goroutine. A panic there is a runner bug: it must exit
// with status 1 (crash), not Go's 2 (which means bad flags here).
func finish(wg *sync.WaitGroup) {
	if p := recover(); p != nil {
		crash(p)
	}
	wg.Done()
}

func crash(p any) {
	fmt.Fprintf(os.Stderr, "cxlab-runner-go: panic: %v\n%s", p, debug.Stack())
	os.Exit(1)
}
