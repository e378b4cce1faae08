package runner

import (
	"sync"
	"sync/atomic"
	"time"

	"cxlab.dev/workloads/internal/metrics"
)

// arrivalRun is an open loop: a generator issues arrival k at its scheduled offset whatever
// the workers do, and the workers (a pool taking them FIFO, or one goroutine per arrival)
// run them. Every slot is preallocated and written by one goroutine only, so tasks take no
// lock.
type arrivalRun struct {
	c        *Config
	work     task
	trial    *metrics.Trial
	errs     *errorTally
	times    taskTimes
	start    time.Time
	maxQueue int64 // the most arrivals waiting for a worker at once
}

func newArrivalRun(c *Config, schedule []time.Duration, work task, trial *metrics.Trial, errs *errorTally) *arrivalRun {
	n := len(schedule)
	return &arrivalRun{c: c, work: work, trial: trial, errs: errs, times: taskTimes{
		scheduled: schedule,
		issued:    make([]time.Duration, n),
		started:   make([]time.Duration, n),
		ended:     make([]time.Duration, n),
		outcome:   make([]outcome, n),
	}}
}

// run issues every arrival and returns once every issued one has ended.
func (a *arrivalRun) run(start time.Time) {
	a.start = start
	var wg sync.WaitGroup
	switch {
	case a.c.Workers == 0: // a goroutine for each arrival: none ever waits, none is dropped
		a.generate(func(k int) {
			a.queued()
			wg.Add(1)
			go func() {
				defer finish(&wg)
				a.one(k)
			}()
		})
	case a.c.OnBusy == "drop":
		// A slot per worker, taken at issue: an arrival finding none is dropped. The slots
		// bound the arrivals handed on to the free workers, so handing on never blocks.
		slots := make(chan struct{}, a.c.ResolvedWorkers())
		handed := make(chan int, a.c.ResolvedWorkers())
		a.workers(&wg, func() {
			for k := range handed {
				a.one(k)
				<-slots
			}
		})
		a.generate(func(k int) {
			select {
			case slots <- struct{}{}:
				a.queued()
				handed <- k
			default:
				a.trial.ArrivalDropped()
			}
		})
		close(handed)
	default:
		// FIFO: issued arrivals wait in a channel of empty structs, which costs no memory per
		// element however long it grows; arrivals are issued in order, so the workers' shared
		// index names the next one.
		waiting := make(chan struct{}, len(a.times.scheduled))
		var next atomic.Int64
		a.workers(&wg, func() {
			for range waiting {
				a.one(int(next.Add(1) - 1))
			}
		})
		a.generate(func(int) {
			a.queued()
			waiting <- struct{}{}
		})
		close(waiting)
	}
	wg.Wait()
}

// generate issues arrival k at its scheduled offset: it sleeps until then or, when late,
// issues at once; it never skips one.
func (a *arrivalRun) generate(issue func(k int)) {
	for k, due := range a.times.scheduled {
		if wait := due - time.Since(a.start); wait > 0 {
			time.Sleep(wait)
		}
		a.times.issued[k] = time.Since(a.start)
		issue(k)
	}
}

// queued counts an arrival handed on, noting the longest queue: it only grows here.
func (a *arrivalRun) queued() {
	a.maxQueue = max(a.maxQueue, a.trial.ArrivalIssued())
}

// workers starts the pool's goroutines, each running loop.
func (a *arrivalRun) workers(wg *sync.WaitGroup, loop func()) {
	wg.Add(a.c.ResolvedWorkers())
	for range a.c.ResolvedWorkers() {
		go func() {
			defer finish(wg)
			loop()
		}()
	}
}

// one runs arrival k: its latency counts from its scheduled start.
func (a *arrivalRun) one(k int) {
	started := time.Since(a.start)
	scheduled := a.times.scheduled[k]
	a.trial.ArrivalStarted(k, max(0, started-scheduled))
	err := a.work()
	ended := time.Since(a.start)
	a.trial.TaskFinished(k, ended-scheduled, outcomeOf(err))
	a.times.started[k], a.times.ended[k] = started, ended
	if err != nil {
		a.times.outcome[k] = failed
		a.errs.add(errorMessage(err))
		return
	}
	a.times.outcome[k] = succeeded
}

// report fills the Result's figures of a duration run and of its arrivals.
func (a *arrivalRun) report(r *Result, wall time.Duration) {
	run := a.c.runTime()
	r.WorkersStarted = a.workersStarted()
	r.setDurationRun(&a.times, run, a.c.Warmup, wall)
	r.setArrival(a.c, a, run)
}

// workersStarted: the pool, or a goroutine per arrival (every one is issued and run).
func (a *arrivalRun) workersStarted() int {
	if a.c.Workers == 0 {
		return len(a.times.scheduled)
	}
	return a.c.ResolvedWorkers()
}
