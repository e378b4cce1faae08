package runner

import (
	"strings"
	"testing"
)

// A closed loop for 1s of 4 workers and 20ms tasks: about 4 × 1s / 20ms = 200 tasks, every
// one started within the second; its tasks are an output, it has no floor and no arrivals.
func TestClosedLoopForADuration(t *testing.T) {
	t.Parallel()
	r, _ := trial(t, strings.Fields("--model goroutines --workload sleep --rtt 20ms --workers 4 --duration 1s")...)
	// Never more than 50 a worker (tasks start at 0, 20ms, …, 980ms). How many fewer depends
	// on how much longer a busy machine makes each sleep, so the count is checked against the
	// tasks' own latencies: every worker busy throughout the second (the latencies add up to
	// at least 4 × 1s, less one task each for the start) and none after the tasks running at
	// 1s (at most 4 × the wall).
	busy := r.LatencyHistogram.Sum
	if r.Tasks < 4 || r.Tasks > 204 || r.TasksOK != int64(r.Tasks) || r.Workers != 4 || r.WorkersStarted != 4 {
		t.Errorf("%d tasks (%d ok) on %d workers (%d started), want at most 200 on 4", r.Tasks, r.TasksOK, r.Workers, r.WorkersStarted)
	}
	if mean := busy / float64(r.Tasks); busy < 4*(1-mean) || busy > 4*r.WallSeconds {
		t.Errorf("the tasks' latencies add up to %v s over %d tasks (wall %v s): want 4 workers busy for the 1s", busy, r.Tasks, r.WallSeconds)
	}
	if r.WallSeconds < 1 || r.WallSeconds > 2 || r.LatencySeconds.P50 < 0.02 || r.LatencySeconds.Max > 0.5 {
		t.Errorf("wall %v, latency %+v: the tasks running at 1s finish, no more start", r.WallSeconds, r.LatencySeconds)
	}
	if r.Arrival != nil || r.Warmup != nil || r.FloorSeconds != nil || r.Efficiency != nil || *r.DurationSeconds != 1 {
		t.Errorf("arrival %v warm-up %v floor %v efficiency %v duration %v", r.Arrival, r.Warmup, r.FloorSeconds, r.Efficiency, r.DurationSeconds)
	}
	var completed int64
	for _, n := range r.Timeline.Completed {
		completed += n
	}
	if completed != int64(r.Tasks) || r.Timeline.InFlight[0] < 3 || r.Timeline.InFlight[0] > 4 {
		t.Errorf("timeline %+v: every task in it, 4 workers busy throughout the first second", *r.Timeline)
	}
	if got := float64(r.TasksOK) / r.WallSeconds; r.ThroughputPerSecond != got {
		t.Errorf("throughput %v, want ok tasks over the wall time %v", r.ThroughputPerSecond, got)
	}
}

// A closed loop's warm-up is the tasks that started in it.
func TestClosedLoopWarmup(t *testing.T) {
	t.Parallel()
	r, _ := trial(t, strings.Fields("--model goroutines --workload sleep --rtt 100ms --workers 2 --duration 1s --warmup 500ms")...)
	if r.Warmup == nil || r.Warmup.TasksOK < 6 || r.Warmup.TasksOK > 10 || r.Warmup.Seconds != 0.5 {
		t.Fatalf("warm-up %+v, want the about 10 tasks that started in the first 500ms", r.Warmup)
	}
	after := r.LatencyHistogram.ZeroCount
	for _, n := range r.LatencyHistogram.Counts {
		after += n
	}
	if after+int64(r.Warmup.TasksOK) != r.TasksOK || r.Tasks != int(r.TasksOK) {
		t.Errorf("%d in the warm-up and %d in the histogram, %d ok", r.Warmup.TasksOK, after, r.TasksOK)
	}
}
