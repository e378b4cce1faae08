package runner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// The verdict says why, with the figures, and stays null when the schedule was kept.
func TestTheSaturationVerdictSaysWhy(t *testing.T) {
	times := &taskTimes{
		scheduled: []time.Duration{0, ms(250), ms(500), ms(750)},
		issued:    []time.Duration{ms(1), ms(251), ms(550), ms(1200)},
	}
	v := judgeGenerator(times, time.Second, 10*time.Millisecond, 0)
	if v.saturation == nil {
		t.Fatalf("lag p99 450ms and 3 of 4 issued in time: not saturated")
	}
	for _, figure := range []string{"lag p99 450 ms over the bound 10 ms", "issued 3/s of 4/s"} {
		if !strings.Contains(*v.saturation, figure) {
			t.Errorf("saturation %q lacks %q", *v.saturation, figure)
		}
	}
	if v := judgeGenerator(times, time.Second, time.Second, 0); v.saturation == nil || strings.Contains(*v.saturation, "lag") {
		t.Errorf("under a 1s bound only the rate is short: %v", v.saturation)
	}
	times.issued = []time.Duration{ms(1), ms(251), ms(501), ms(751)}
	if v := judgeGenerator(times, time.Second, 10*time.Millisecond, 0); v.saturation != nil {
		t.Errorf("on time, saturated: %q", *v.saturation)
	}
}

// An arrival run's figures: dropped arrivals are neither ok nor failed, count in the lag but
// in no histogram and no interval; the warm-up's are apart.
func TestArrivalFigures(t *testing.T) {
	c := &Config{Arrival: "poisson", OnBusy: "drop", Duration: time.Second, Warmup: ms(200), MaxLag: 10 * time.Millisecond}
	a := &arrivalRun{c: c, maxQueue: 3, times: taskTimes{
		scheduled: []time.Duration{ms(100), ms(300), ms(400), ms(500), ms(600)},
		issued:    []time.Duration{ms(101), ms(301), ms(430), ms(501), ms(601)},
		started:   []time.Duration{ms(101), ms(310), 0, ms(520), ms(601)},
		ended:     []time.Duration{ms(150), ms(350), 0, ms(900), ms(700)},
		outcome:   []outcome{succeeded, succeeded, notRun, failed, succeeded},
	}}
	var r Result
	a.report(&r, 950*time.Millisecond)
	got := r.Arrival
	if got.Arrivals != 5 || got.Dropped != 1 || got.MaxQueue != 3 || got.Process != "poisson" || got.OnBusy != "drop" {
		t.Errorf("arrival %+v", *got)
	}
	// After the warm-up: the lags 1, 1, 30 (dropped), 1 ms; the successful 300ms and 600ms.
	if got.LagSeconds != (Lag{P50: 0.001, P99: 0.03, Max: 0.03}) || got.GeneratorSaturated == (got.Saturation == nil) || !got.GeneratorSaturated {
		t.Errorf("lag %+v, saturated %v (%v)", got.LagSeconds, got.GeneratorSaturated, got.Saturation)
	}
	if w, s := got.WaitHistogram, got.ServiceHistogram; w.Min != 0.001 || w.Max != 0.01 || w.Sum != 0.011 || s.Min != 0.04 || s.Max != 0.099 {
		t.Errorf("waits %+v, services %+v: want those of the two successful tasks after the warm-up", w, s)
	}
	if r.LatencySeconds != (Latency{P50: 0.05, P90: 0.1, P95: 0.1, P97_5: 0.1, P99: 0.1, P99_9: 0.1, Max: 0.1}) || r.ThroughputPerSecond != 2/0.75 {
		t.Errorf("latency %+v, throughput %v", r.LatencySeconds, r.ThroughputPerSecond)
	}
	if r.Warmup == nil || *r.Warmup != (Warmup{Seconds: 0.2, TasksOK: 1, LatencySeconds: Latency{0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05}}) {
		t.Errorf("warm-up %+v", r.Warmup)
	}
	if !slices.Equal(r.Timeline.Completed, []int64{4}) || r.Timeline.InFlight[0] != 0.568 {
		t.Errorf("timeline %+v: the 4 tasks that ran, 49 + 40 + 380 + 99 ms in flight in 1s", *r.Timeline)
	}
	if r.WorkersStarted != 5 {
		t.Errorf("%d workers started: --workers 0 starts one per arrival", r.WorkersStarted)
	}
}

// The cut lowers the histogram with the most buckets, the latency's, then the wait's, then the
// service's on a tie; never the caller's.
func TestTheCutLowersTheWidestHistogram(t *testing.T) {
	wide := func(n int) Histogram {
		h := Histogram{Schema: 3, Offset: -5, Counts: make([]int64, n)}
		for i := range h.Counts {
			h.Counts[i] = 1
		}
		return h
	}
	for _, c := range []struct {
		name                        string
		latency, wait, service, cut int // buckets; cut: 0 latency, 1 wait, 2 service, -1 none
	}{
		{"a tie of all three", 8, 8, 8, 0},
		{"wait and service tie", 4, 8, 8, 1},
		{"service widest", 4, 6, 8, 2},
		{"none with two buckets", 1, 1, 0, -1},
	} {
		r := Result{LatencyHistogram: wide(c.latency), Arrival: &Arrival{WaitHistogram: wide(c.wait), ServiceHistogram: wide(c.service)}}
		before := r.Arrival
		ok := r.lowerWidestHistogram()
		schemas := []int{r.LatencyHistogram.Schema, r.Arrival.WaitHistogram.Schema, r.Arrival.ServiceHistogram.Schema}
		want := []int{3, 3, 3}
		if c.cut >= 0 {
			want[c.cut] = 2
		}
		if ok != (c.cut >= 0) || !slices.Equal(schemas, want) {
			t.Errorf("%s: lowered %v, schemas %v, want %v", c.name, ok, schemas, want)
		}
		if before.WaitHistogram.Schema != 3 || before.ServiceHistogram.Schema != 3 {
			t.Errorf("%s: the caller's arrival was lowered", c.name)
		}
	}
	// Buckets -5..2 at schema 3 are -2..1 at schema 2: i -> ceil(i/2), so -5 and -4 become -2.
	if h := wide(8).lowered(); h.Offset != -2 || !slices.Equal(h.Counts, []int64{2, 2, 2, 2}) {
		t.Errorf("lowered: offset %d counts %v", h.Offset, h.Counts)
	}
}

// A Result over the bound loses its timeline's resolution before its histograms'.
func TestEncodeHalvesTheTimelineFirst(t *testing.T) {
	tl := Timeline{IntervalSeconds: 1}
	for i := range 64 {
		tl.Completed = append(tl.Completed, 1_000_000+int64(i))
		tl.InFlight = append(tl.InFlight, 12345.678)
		tl.P99 = append(tl.P99, 0.123456)
	}
	h := Histogram{Schema: 5, Counts: slices.Repeat([]int64{12345678}, 100)}
	r := Result{Workers: 1, Timeline: &tl, LatencyHistogram: h, Arrival: &Arrival{WaitHistogram: h, ServiceHistogram: h},
		Experiment: strings.Repeat("e", 600)}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if n := len(back.Timeline.Completed); n != 1 || back.Timeline.IntervalSeconds != 64 || back.Timeline.Completed[0] != 64*1_000_000+63*64/2 {
		t.Errorf("timeline %+v: halved to one interval of 64s first", *back.Timeline)
	}
	if back.LatencyHistogram.Schema != 4 || back.Arrival.WaitHistogram.Schema != 4 || back.Arrival.ServiceHistogram.Schema != 5 {
		t.Errorf("schemas %d %d %d: latency then wait lowered", back.LatencyHistogram.Schema,
			back.Arrival.WaitHistogram.Schema, back.Arrival.ServiceHistogram.Schema)
	}
	if len(r.Timeline.Completed) != 64 || r.LatencyHistogram.Schema != 5 || r.Arrival.WaitHistogram.Schema != 5 {
		t.Errorf("Encode cut the caller's Result")
	}
}

// A task scheduled (closed loop: started) exactly at the warm-up's end is after it.
func TestTheWarmupEndsAtItsBoundary(t *testing.T) {
	times := &taskTimes{
		scheduled: []time.Duration{0, ms(250)},
		issued:    []time.Duration{ms(100), ms(300)},
		started:   []time.Duration{ms(100), ms(300)},
		ended:     []time.Duration{ms(150), ms(400)},
		outcome:   []outcome{succeeded, succeeded},
	}
	if v := judgeGenerator(times, time.Second, time.Second, ms(250)); v.lag != (Lag{0.05, 0.05, 0.05}) {
		t.Errorf("lag %+v, want the arrival at 250ms's 50ms", v.lag)
	}
	var r Result
	r.setDurationRun(times, time.Second, ms(250), time.Second)
	if r.LatencySeconds.Max != 0.15 || r.Warmup.TasksOK != 1 || r.Warmup.LatencySeconds.Max != 0.15 {
		t.Errorf("latency %+v, warm-up %+v: the task at 250ms is after the warm-up", r.LatencySeconds, *r.Warmup)
	}
}
