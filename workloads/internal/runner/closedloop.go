package runner

import (
	"sync"
	"sync/atomic"
	"time"

	"cxlab.dev/workloads/internal/metrics"
)

// closedLoop is a closed loop for a duration (k6's constant VUs): each of --workers starts
// its next task as soon as the last one ends, until the duration has passed since the task
// phase began (or maxTasks have started); tasks running then finish. Each worker keeps its own tasks' times, joined at
// the end, so tasks take no lock.
type closedLoop struct {
	c       *Config
	work    task
	trial   *metrics.Trial
	errs    *errorTally
	mine    []taskTimes  // per worker: started, ended and outcome
	started atomic.Int64 // tasks started, at most maxTasks: their times must fit in memory
}

func newClosedLoop(c *Config, work task, trial *metrics.Trial, errs *errorTally) *closedLoop {
	return &closedLoop{c: c, work: work, trial: trial, errs: errs, mine: make([]taskTimes, c.Workers)}
}

func (l *closedLoop) run(start time.Time) {
	var wg sync.WaitGroup
	wg.Add(l.c.Workers)
	for w := range l.c.Workers {
		go func() {
			defer finish(&wg)
			mine := &l.mine[w]
			for {
				started := time.Since(start)
				if started >= l.c.Duration || l.started.Add(1) > maxTasks {
					return
				}
				l.trial.TaskStarted(w) // the worker's own shard
				err := l.work()
				ended := time.Since(start)
				l.trial.TaskFinished(w, ended-started, outcomeOf(err))
				mine.started = append(mine.started, started)
				mine.ended = append(mine.ended, ended)
				if err != nil {
					mine.outcome = append(mine.outcome, failed)
					l.errs.add(errorMessage(err))
					continue
				}
				mine.outcome = append(mine.outcome, succeeded)
			}
		}()
	}
	wg.Wait()
}

// report fills the Result's figures of a duration run; its tasks are those that started.
func (l *closedLoop) report(r *Result, wall time.Duration) {
	times := l.times()
	r.Tasks = len(times.started)
	r.setDurationRun(&times, l.c.Duration, l.c.Warmup, wall)
}

// times joins the workers' tasks: scheduled = issued = started in a closed loop.
func (l *closedLoop) times() taskTimes {
	var t taskTimes
	for _, m := range l.mine {
		t.started = append(t.started, m.started...)
		t.ended = append(t.ended, m.ended...)
		t.outcome = append(t.outcome, m.outcome...)
	}
	t.scheduled, t.issued = t.started, t.started
	return t
}
