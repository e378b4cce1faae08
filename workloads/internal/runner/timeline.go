package runner

import (
	"slices"
	"time"
)

// maxIntervals bounds a timeline (runner-contract.json timeline.maxIntervals).
const maxIntervals = 64

// Timeline is the Result's timeline of a duration run (CONTRACT.md, Duration runs): per
// interval [i·Δ, (i+1)·Δ) from the task phase's start to its last task's end, the tasks that
// ended in it, the mean tasks in flight over it, and the p99 latency of the successful tasks
// that ended in it.
type Timeline struct {
	IntervalSeconds float64   `json:"intervalSeconds"`
	Completed       []int64   `json:"completed"`
	InFlight        []float64 `json:"inFlight"`
	P99             []float64 `json:"p99"`
}

// intervalFor is the smallest 2^j seconds (j >= 0) cutting [0, span] into at most
// maxIntervals intervals.
func intervalFor(span time.Duration) time.Duration {
	interval := time.Second
	for span/interval+1 > maxIntervals {
		interval *= 2
	}
	return interval
}

// buildTimeline is the timeline of the tasks that ran (dropped arrivals never did).
func buildTimeline(t *taskTimes) Timeline {
	var span time.Duration
	for k, o := range t.outcome {
		if o != notRun {
			span = max(span, t.ended[k])
		}
	}
	interval := intervalFor(span)
	n := int(span/interval) + 1
	completed := make([]int64, n)
	okEnded := make([]int, n+1) // successful tasks ended per interval, then where each one's latencies start
	partial := make([]float64, n)
	whole := make([]int64, n+1) // a difference array of the intervals a task covers whole
	for k, o := range t.outcome {
		if o == notRun {
			continue
		}
		started, ended := t.started[k], t.ended[k]
		first, last := int(started/interval), int(ended/interval)
		completed[last]++
		if o == succeeded {
			okEnded[last+1]++
		}
		// [started, ended) overlaps its first and last intervals in part, those between whole.
		if first == last {
			partial[first] += float64(ended - started)
			continue
		}
		partial[first] += float64(time.Duration(first+1)*interval - started)
		partial[last] += float64(ended - time.Duration(last)*interval)
		whole[first+1]++
		whole[last]--
	}
	// The successful tasks' latencies grouped by the interval they ended in.
	for i := range n {
		okEnded[i+1] += okEnded[i]
	}
	latencies := make([]time.Duration, okEnded[n])
	fill := slices.Clone(okEnded[:n])
	for k, o := range t.outcome {
		if o == succeeded {
			i := int(t.ended[k] / interval)
			latencies[fill[i]] = t.ended[k] - t.scheduled[k]
			fill[i]++
		}
	}
	tl := Timeline{IntervalSeconds: interval.Seconds(), Completed: completed,
		InFlight: make([]float64, n), P99: make([]float64, n)}
	var covering int64
	for i := range n {
		covering += whole[i]
		tl.InFlight[i] = roundTo(partial[i]/float64(interval)+float64(covering), 3)
		if ended := latencies[okEnded[i]:okEnded[i+1]]; len(ended) > 0 {
			slices.Sort(ended)
			tl.P99[i] = significant(nearestRank(ended, 990).Seconds())
		}
	}
	return tl
}

// halved is the timeline at twice the interval: intervals paired, their completed tasks
// summed, in flight averaged (a lone last interval's other half lies past the run, where
// nothing is in flight) and p99 the larger, an upper bound of the pair's. One step of the
// cut of an oversized Result (Result.Encode).
func (t Timeline) halved() Timeline {
	n := (len(t.Completed) + 1) / 2
	out := Timeline{IntervalSeconds: t.IntervalSeconds * 2, Completed: make([]int64, n),
		InFlight: make([]float64, n), P99: make([]float64, n)}
	for i := range len(t.Completed) {
		out.Completed[i/2] += t.Completed[i]
		out.InFlight[i/2] += t.InFlight[i]
		out.P99[i/2] = max(out.P99[i/2], t.P99[i])
	}
	for i := range out.InFlight {
		out.InFlight[i] = roundTo(out.InFlight[i]/2, 3)
	}
	return out
}
