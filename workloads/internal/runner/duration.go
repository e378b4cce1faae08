package runner

import "time"

// outcome is how a task of a duration run ended.
type outcome uint8

const (
	notRun    outcome = iota // an arrival dropped with every worker busy
	succeeded                // ok
	failed
)

// taskTimes are a duration run's tasks, one slot each, as offsets from the task phase's start
// (CONTRACT.md, Duration runs): scheduled, issued (the generator handed it on), started and
// ended. In a closed loop scheduled = issued = started, the same slice.
type taskTimes struct {
	scheduled, issued, started, ended []time.Duration
	outcome                           []outcome
}

// Warmup is the Result's warmup: the successful tasks scheduled (closed loop: started) in the
// first --warmup, left out of the latency figures, the histograms and the throughput.
type Warmup struct {
	Seconds        float64 `json:"seconds"`
	TasksOK        int     `json:"tasksOk"`
	LatencySeconds Latency `json:"latencySeconds"`
}

// setDurationRun fills the Result's keys of a duration run from its tasks' times (CONTRACT.md,
// Duration runs in the Result): the latency figures and the throughput of the tasks after the
// warm-up, the warm-up's apart, and the timeline of them all (setParameters leaves the floor
// null: a run for a time has no fastest time).
func (r *Result) setDurationRun(t *taskTimes, run, warmup, wall time.Duration) {
	seconds := round6(run.Seconds())
	r.DurationSeconds = &seconds
	after := afterWarmup(t, warmup, latency)
	r.ThroughputPerSecond = ratio(float64(len(after)), (wall - warmup).Seconds())
	r.LatencyHistogram = buildHistogram(after)
	r.LatencySeconds = latencies(after)
	timeline := buildTimeline(t)
	r.Timeline = &timeline
	r.Warmup = nil
	if warmup > 0 {
		var warm []time.Duration
		for k, o := range t.outcome {
			if o == succeeded && t.scheduled[k] < warmup {
				warm = append(warm, latency(t, k))
			}
		}
		r.Warmup = &Warmup{Seconds: round6(warmup.Seconds()), TasksOK: len(warm), LatencySeconds: latencies(warm)}
	}
}

// afterWarmup is of(t, k) for each successful task scheduled at or after warmup.
func afterWarmup(t *taskTimes, warmup time.Duration, of func(t *taskTimes, k int) time.Duration) []time.Duration {
	var out []time.Duration
	for k, o := range t.outcome {
		if o == succeeded && t.scheduled[k] >= warmup {
			out = append(out, of(t, k))
		}
	}
	return out
}

// A task's latency counts from its scheduled start, so that waiting for a worker is in it;
// its wait is until a worker started it, its service time the rest.
func latency(t *taskTimes, k int) time.Duration { return t.ended[k] - t.scheduled[k] }
func wait(t *taskTimes, k int) time.Duration    { return max(0, t.started[k]-t.scheduled[k]) }
func service(t *taskTimes, k int) time.Duration { return t.ended[k] - t.started[k] }
