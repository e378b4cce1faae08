package runner

import (
	"sync"
	"sync/atomic"
	"time"

	"cxlab.dev/workloads/internal/metrics"
)

// counted is a closed burst: --tasks tasks, --workers pulling them, done when the last ends.
type counted struct {
	c *Config
	// Indexed by task id, allocated up front: no locking and no growth while
	// tasks run, even for a million of them.
	durations []time.Duration
	one       func(i int)
}

func newCounted(c *Config, work task, trial *metrics.Trial, errs *errorTally) *counted {
	t := &counted{c: c, durations: make([]time.Duration, c.Tasks)}
	// Offsets from one monotonic epoch: one clock read per timestamp, where
	// time.Now reads two clocks.
	epoch := time.Now()
	t.one = func(i int) {
		trial.TaskStarted(i)
		t0 := time.Since(epoch)
		err := work()
		d := time.Since(epoch) - t0
		trial.TaskFinished(i, d, outcomeOf(err))
		if err != nil {
			t.durations[i] = failedTask
			errs.add(errorMessage(err))
			return
		}
		t.durations[i] = d
	}
	return t
}

func (t *counted) run(time.Time) { runTasks(t.c.Tasks, t.c.Workers, t.c.ResolvedWorkers(), t.one) }

func (t *counted) report(r *Result, wall time.Duration) {
	r.ThroughputPerSecond = ratio(float64(r.TasksOK), wall.Seconds())
	r.LatencyHistogram = buildHistogram(t.durations)
	r.LatencySeconds = latencies(t.durations)
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
