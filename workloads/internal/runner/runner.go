package runner

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"cxlab.dev/workloads/internal/measure"
	"cxlab.dev/workloads/internal/metrics"
)

// Run runs the task phase of c, reporting progress to trial, and returns
// the Result. Only the task phase is timed and measured; it begins when the
// runner leaves the start barrier (at once without one). An arrival run's
// schedule is drawn before (Main).
func Run(c *Config, schedule []time.Duration, trial *metrics.Trial, barrier *startBarrier) (Result, error) {
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
	var errs errorTally
	shape := newShape(c, schedule, work, trial, &errs)

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

	shape.run(start)

	end := time.Now()
	after, err := measure.ReadUsage()
	trial.End(end)
	seen := sampler.Stop()
	if err != nil {
		return Result{}, fmt.Errorf("getrusage: %w", err)
	}

	wall := end.Sub(start).Seconds()
	used := after.Sub(before)
	ok, failures := trial.Outcomes() // one read: the kinds sum to the failed tasks
	gomaxprocs := runtime.GOMAXPROCS(0)
	host := measure.ReadHost()
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
		TasksFailed:                failures.Total(),
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
		RSSTimeline: RSSTimeline{
			IntervalSeconds: seen.Timeline.Interval.Seconds(),
			RSSBytes:        seen.Timeline.Samples,
		},
		CPUs:         cpus,
		Runtime:      runtime.Version(),
		Host:         &host,
		FailureKinds: newFailureKinds(failures),
		Errors:       errs.top(maxErrorKinds),
	}
	if c.Syscalls {
		r.Syscalls = &Syscalls{Unavailable: "the Go runner does not count system calls: run it under strace -c -f by hand"}
	}
	r.setParameters(c, wall)
	shape.report(&r, end.Sub(start))
	return r, nil
}

// shape is how a trial's tasks run: a count of them (runTasks), a closed loop for a duration
// or arrivals (CONTRACT.md, Duration runs); report fills the Result's figures of its tasks.
type shape interface {
	run(start time.Time)
	report(r *Result, wall time.Duration)
}

func newShape(c *Config, schedule []time.Duration, work task, trial *metrics.Trial, errs *errorTally) shape {
	switch {
	case c.Arrival != "":
		return newArrivalRun(c, schedule, work, trial, errs)
	case c.closedLoop():
		return newClosedLoop(c, work, trial, errs)
	}
	return newCounted(c, work, trial, errs)
}

// setParameters fills the workload's own parameter and, where a floor
// exists, the floor and the efficiency against it; the rest stay null.
func (r *Result) setParameters(c *Config, wall float64) {
	var floor float64
	switch c.Workload {
	case "http", "sleep":
		if c.Workload == "http" && c.TargetMode == "direct" {
			return // the user's service: no simulated RTT, so no floor nor efficiency
		}
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
	if c.timed() {
		return // a run for a time has no fastest time
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
