package runner

import (
	"math/rand/v2"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestLatenciesNearestRank(t *testing.T) {
	cases := []struct {
		name      string
		durations []time.Duration
		want      Latency
	}{
		{"one", []time.Duration{ms(7)}, Latency{0.007, 0.007, 0.007, 0.007, 0.007, 0.007, 0.007}},
		{"ten", []time.Duration{ms(10), ms(9), ms(8), ms(7), ms(6), ms(5), ms(4), ms(3), ms(2), ms(1)},
			Latency{P50: 0.005, P90: 0.009, P95: 0.010, P97_5: 0.010, P99: 0.010, P99_9: 0.010, Max: 0.010}},
		{"three", []time.Duration{ms(3), ms(1), ms(2)}, Latency{P50: 0.002, P90: 0.003, P95: 0.003, P97_5: 0.003, P99: 0.003, P99_9: 0.003, Max: 0.003}},
	}
	for _, c := range cases {
		if got := latencies(c.durations); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestLatenciesHundredAndMillion(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = ms(100 - i) // 1..100ms, reversed
	}
	if got, want := latencies(d), (Latency{P50: 0.05, P90: 0.09, P95: 0.095, P97_5: 0.098, P99: 0.099, P99_9: 0.1, Max: 0.1}); got != want {
		t.Errorf("100: got %+v, want %+v", got, want)
	}

	const n = 1_000_000
	d = make([]time.Duration, n)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	rand.Shuffle(n, func(i, j int) { d[i], d[j] = d[j], d[i] })
	got := latencies(d)
	want := Latency{P50: 500_000e-9, P90: 900_000e-9, P95: 950_000e-9, P97_5: 975_000e-9, P99: 990_000e-9,
		P99_9: 999_000e-9, Max: 1_000_000e-9}
	if got != want {
		t.Errorf("1e6: got %+v, want %+v", got, want)
	}
}

func TestLatenciesEmpty(t *testing.T) {
	if got := latencies(nil); got != (Latency{}) {
		t.Errorf("got %+v", got)
	}
}

func TestLatenciesLeaveFailedTasksOut(t *testing.T) {
	got := latencies([]time.Duration{failedTask, 3 * time.Second, failedTask, time.Second})
	if got.P50 != 1 || got.Max != 3 {
		t.Fatalf("latencies = %+v, want p50 1s and max 3s from the two successful tasks", got)
	}
	if got := latencies([]time.Duration{failedTask}); got != (Latency{}) {
		t.Fatalf("latencies of only failures = %+v, want zeros", got)
	}
}

// Microsecond figures keep their digits (9 significant, never fixed decimals): 1.4 µs is not
// written as 1 µs, nor 1.5 µs as 2 µs, in latencySeconds, the timeline's p99 or the lag.
func TestMicrosecondFiguresKeepTheirDigits(t *testing.T) {
	if got := latencies([]time.Duration{1400, 1400, 1500}); got != (Latency{1.4e-6, 1.5e-6, 1.5e-6, 1.5e-6, 1.5e-6, 1.5e-6, 1.5e-6}) {
		t.Errorf("latencySeconds %+v", got)
	}
	var times taskTimes
	for k := range 10 {
		scheduled := time.Duration(k) * 10 * time.Millisecond
		times.scheduled = append(times.scheduled, scheduled)
		times.issued = append(times.issued, scheduled+1500)
		times.started = append(times.started, scheduled+1500)
		times.ended = append(times.ended, scheduled+2900)
		times.outcome = append(times.outcome, succeeded)
	}
	if p99 := buildTimeline(&times).P99; len(p99) != 1 || p99[0] != 2.9e-6 {
		t.Errorf("timeline p99 %v, want [2.9e-06]", p99)
	}
	if lag := judgeGenerator(&times, time.Second, 10*time.Millisecond, 0).lag; lag != (Lag{1.5e-6, 1.5e-6, 1.5e-6}) {
		t.Errorf("lag %+v, want 1.5 µs each", lag)
	}
}
