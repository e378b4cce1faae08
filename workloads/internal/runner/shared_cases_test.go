package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"cxlab.dev/workloads/internal/measure"
)

// The contract's shared cases (workloads/testdata), the Python half in
// tests/contract/test_runner_contract.py.

// The same oversized Result the Python runner's test truncates (workloads/testdata): both
// runners must cut it to the same document (tests/contract/test_runner_contract.py holds the Python half).
func TestTruncationIsTheContractsRule(t *testing.T) {
	var r Result
	readJSON(t, "../../testdata/oversized-result.json", &r)
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("%d bytes, over %d", len(b), MaxResultBytes)
	}
	var got, want map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	readJSON(t, "../../testdata/truncated-result.json", &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the Go runner truncates differently:\n got %d errors, %v timeline samples\nwant %d errors, %v",
			len(got["errors"].([]any)), len(got["rssTimeline"].(map[string]any)["rssBytes"].([]any)),
			len(want["errors"].([]any)), len(want["rssTimeline"].(map[string]any)["rssBytes"].([]any)))
	}
}

// The host is never cut: the oversized Result with the longest host the schema allows is cut
// as far as it needs and keeps it whole (the Python half in tests/contract/test_runner_contract.py).
func TestTheCutKeepsTheHost(t *testing.T) {
	host := measure.Host{CPUModel: strings.Repeat("c", 256), Kernel: strings.Repeat("k", 256)}
	for _, path := range []string{"../../testdata/oversized-result.json", "../../testdata/oversized-arrival-result.json"} {
		var r Result
		readJSON(t, path, &r)
		r.Host = &host
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxResultBytes {
			t.Fatalf("%s: %d bytes, over %d", path, len(b), MaxResultBytes)
		}
		var cut Result
		if err := json.Unmarshal(b, &cut); err != nil {
			t.Fatal(err)
		}
		if cut.Host == nil || *cut.Host != host {
			t.Errorf("%s: host %+v after the cut", path, cut.Host)
		}
	}
}

// The failure kinds are never cut either: an oversized Result failing in every kind is cut as
// far as it needs and keeps them whole.
func TestTheCutKeepsTheFailureKinds(t *testing.T) {
	kinds := FailureKinds{Connect: 1, Timeout: 22, TLS: 333, Status: 4444, Other: 55555}
	for _, path := range []string{"../../testdata/oversized-result.json", "../../testdata/oversized-arrival-result.json"} {
		var r Result
		readJSON(t, path, &r)
		r.FailureKinds = &kinds
		r.TasksFailed = 60355
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxResultBytes {
			t.Fatalf("%s: %d bytes, over %d", path, len(b), MaxResultBytes)
		}
		var cut Result
		if err := json.Unmarshal(b, &cut); err != nil {
			t.Fatal(err)
		}
		if cut.FailureKinds == nil || *cut.FailureKinds != kinds {
			t.Errorf("%s: failure kinds %+v after the cut", path, cut.FailureKinds)
		}
	}
}

// The floor cases the Python runner's test computes too (workloads/testdata/floors.json).
func TestTheFloorIsTheContractsFormula(t *testing.T) {
	var shared struct {
		Cases []struct {
			Workload     string   `json:"workload"`
			Tasks        int      `json:"tasks"`
			Workers      int      `json:"workers"`
			RTT          string   `json:"rtt"`
			Hold         string   `json:"hold"`
			FloorSeconds *float64 `json:"floorSeconds"`
		} `json:"cases"`
	}
	readJSON(t, "../../testdata/floors.json", &shared)
	for _, c := range shared.Cases {
		rtt, _ := time.ParseDuration(c.RTT)
		hold, _ := time.ParseDuration(c.Hold)
		r := Result{Workers: c.Workers}
		r.setParameters(&Config{Workload: c.Workload, Tasks: c.Tasks, RTT: rtt, Hold: hold}, 1)
		switch {
		case c.FloorSeconds == nil && r.FloorSeconds != nil:
			t.Errorf("%+v: floor %v, want none", c, *r.FloorSeconds)
		case c.FloorSeconds != nil && (r.FloorSeconds == nil || math.Abs(*r.FloorSeconds-*c.FloorSeconds) > 1e-9):
			t.Errorf("%+v: floor %v, want %v", c, r.FloorSeconds, *c.FloorSeconds)
		}
	}
}

// The latency histograms the Python runner's test builds too (workloads/testdata/histograms.json).
func TestSharedHistogramCases(t *testing.T) {
	var shared struct {
		Cases []struct {
			Name      string    `json:"name"`
			Latencies []float64 `json:"latenciesSeconds"`
			Histogram Histogram `json:"histogram"`
		} `json:"cases"`
	}
	readJSON(t, "../../testdata/histograms.json", &shared)
	for _, c := range shared.Cases {
		durations := make([]time.Duration, len(c.Latencies))
		for i, v := range c.Latencies {
			durations[i] = time.Duration(math.Round(v * 1e9))
		}
		got, want := buildHistogram(durations), c.Histogram
		if want.Counts == nil {
			want.Counts = []int64{}
		}
		if got.Schema != want.Schema || got.ZeroCount != want.ZeroCount || got.Offset != want.Offset ||
			!reflect.DeepEqual(got.Counts, want.Counts) {
			t.Errorf("%s: schema %d zero %d offset %d counts %v, want %d %d %d %v", c.Name,
				got.Schema, got.ZeroCount, got.Offset, got.Counts, want.Schema, want.ZeroCount, want.Offset, want.Counts)
		}
		// Written to 9 significant digits: compared relatively, so 1 µs is not 1.4 µs.
		for _, pair := range [][2]float64{{got.Sum, want.Sum}, {got.Min, want.Min}, {got.Max, want.Max}} {
			if math.Abs(pair[0]-pair[1]) > 1e-8*math.Abs(pair[1])+1e-15 {
				t.Errorf("%s: sum/min/max %v, want %v", c.Name, pair[0], pair[1])
			}
		}
	}
}

// The oversized arrival Result the Python runner's test cuts too: past the errors and the RSS
// timeline, the timeline's halvings and the widest histograms' lower schemas.
func TestTheCutOfAnArrivalResultIsTheContractsRule(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/oversized-arrival-result.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	whole, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	validateResult(t, whole)
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("%d bytes, over %d", len(b), MaxResultBytes)
	}
	validateResult(t, b)
	var got, want map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	readJSON(t, "../../testdata/truncated-arrival-result.json", &want)
	if !reflect.DeepEqual(got, want) {
		for key := range want {
			if !reflect.DeepEqual(got[key], want[key]) {
				t.Errorf("%s: got %v\nwant %v", key, got[key], want[key])
			}
		}
	}
	if again, _ := r.Encode(); !bytes.Equal(again, b) {
		t.Errorf("Encode changed the Result it cut")
	}
	// The case takes every step of the cut: it means something only if it does.
	var cut Result
	if err := json.Unmarshal(b, &cut); err != nil {
		t.Fatal(err)
	}
	lowered := 0
	for _, pair := range [][2]Histogram{{r.LatencyHistogram, cut.LatencyHistogram},
		{r.Arrival.WaitHistogram, cut.Arrival.WaitHistogram}, {r.Arrival.ServiceHistogram, cut.Arrival.ServiceHistogram}} {
		lowered += pair[0].Schema - pair[1].Schema
	}
	if len(cut.Errors) != 0 || len(cut.RSSTimeline.RSSBytes) != 1 || len(cut.Timeline.Completed) != 1 || lowered < 2 {
		t.Errorf("the cut stopped early: %d errors, %d RSS samples, %d intervals, %d schemas lowered",
			len(cut.Errors), len(cut.RSSTimeline.RSSBytes), len(cut.Timeline.Completed), lowered)
	}
}

// arrivals.json: duration runs computed alike by both runners (tests/contract/test_runner_contract.py).
type arrivalCases struct {
	Schedules []struct {
		Name             string       `json:"name"`
		Rate             float64      `json:"rate"`
		Stages           []string     `json:"stages"`
		Duration         string       `json:"duration"`
		ExpectedArrivals float64      `json:"expectedArrivals"`
		Points           [][2]float64 `json:"points"`
		Uniform          []float64    `json:"uniform"`
	} `json:"schedules"`
	Timelines []struct {
		Name           string   `json:"name"`
		Tasks          [][4]any `json:"tasks"`
		Warmup         float64  `json:"warmup"`
		Timeline       Timeline `json:"timeline"`
		LatencySeconds Latency  `json:"latencySeconds"`
		WarmupFigures  *Warmup  `json:"warmupFigures"`
	} `json:"timelines"`
	Halvings []struct {
		Name     string   `json:"name"`
		Timeline Timeline `json:"timeline"`
		Halved   Timeline `json:"halved"`
	} `json:"halvings"`
	Generators []struct {
		Name      string    `json:"name"`
		Scheduled []float64 `json:"scheduled"`
		Issued    []float64 `json:"issued"`
		Duration  string    `json:"duration"`
		MaxLag    string    `json:"maxLag"`
		Warmup    float64   `json:"warmup"`
		Rate      float64   `json:"ratePerSecond"`
		Achieved  float64   `json:"achievedRatePerSecond"`
		Lag       Lag       `json:"lagSeconds"`
		Saturated bool      `json:"saturated"`
	} `json:"generators"`
}

func loadArrivalCases(t *testing.T) arrivalCases {
	var cases arrivalCases
	readJSON(t, "../../testdata/arrivals.json", &cases)
	if len(cases.Schedules) == 0 || len(cases.Timelines) == 0 || len(cases.Halvings) == 0 || len(cases.Generators) == 0 {
		t.Fatalf("arrivals.json lacks a kind of case: %+v", cases)
	}
	return cases
}

// near: equal after rounding to 6 decimals, within 1e-9.
func near(got, want float64) bool { return math.Abs(round6(got)-round6(want)) <= 1e-9 }

func nearAll(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !near(got[i], want[i]) {
			return false
		}
	}
	return true
}

func seconds(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Second))) }

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSharedSchedules(t *testing.T) {
	for _, c := range loadArrivalCases(t).Schedules {
		stages, err := parseStages(strings.Join(c.Stages, ","))
		if len(c.Stages) == 0 {
			stages, err = nil, nil
		}
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		p := newRateProfile(c.Rate, stages, mustDuration(t, c.Duration))
		if got := p.expected(); !near(got, c.ExpectedArrivals) {
			t.Errorf("%s: Λ(D) = %v, want %v", c.Name, got, c.ExpectedArrivals)
		}
		for _, pt := range c.Points {
			if got := p.inverse(pt[0]); !near(got, pt[1]) {
				t.Errorf("%s: Λ⁻¹(%v) = %v, want %v", c.Name, pt[0], got, pt[1])
			}
		}
		var got []float64
		for _, d := range p.schedule("uniform", 1) {
			got = append(got, d.Seconds())
		}
		if !nearAll(got, c.Uniform) {
			t.Errorf("%s: uniform schedule %v, want %v", c.Name, got, c.Uniform)
		}
	}
}

// sharedTimes are a case's tasks, [scheduled, started, ended, ok] in seconds.
func sharedTimes(t *testing.T, tasks [][4]any) taskTimes {
	var tt taskTimes
	for _, task := range tasks {
		ok, isBool := task[3].(bool)
		if !isBool {
			t.Fatalf("task %v: the fourth is not ok", task)
		}
		tt.scheduled = append(tt.scheduled, seconds(task[0].(float64)))
		tt.started = append(tt.started, seconds(task[1].(float64)))
		tt.ended = append(tt.ended, seconds(task[2].(float64)))
		tt.outcome = append(tt.outcome, map[bool]outcome{true: succeeded, false: failed}[ok])
	}
	tt.issued = tt.started
	return tt
}

func sameTimeline(got, want Timeline) bool {
	return near(got.IntervalSeconds, want.IntervalSeconds) && reflect.DeepEqual(got.Completed, want.Completed) &&
		nearAll(got.InFlight, want.InFlight) && nearAll(got.P99, want.P99)
}

func sameLatency(got, want Latency) bool {
	return near(got.P50, want.P50) && near(got.P90, want.P90) && near(got.P95, want.P95) && near(got.P97_5, want.P97_5) &&
		near(got.P99, want.P99) && near(got.P99_9, want.P99_9) && near(got.Max, want.Max)
}

func TestSharedTimelines(t *testing.T) {
	for _, c := range loadArrivalCases(t).Timelines {
		times := sharedTimes(t, c.Tasks)
		var r Result
		warmup := seconds(c.Warmup)
		r.setDurationRun(&times, 10*time.Second, warmup, 10*time.Second)
		if !sameTimeline(*r.Timeline, c.Timeline) {
			t.Errorf("%s: timeline %+v\nwant %+v", c.Name, *r.Timeline, c.Timeline)
		}
		if !sameLatency(r.LatencySeconds, c.LatencySeconds) {
			t.Errorf("%s: latency %+v, want %+v", c.Name, r.LatencySeconds, c.LatencySeconds)
		}
		switch w := c.WarmupFigures; {
		case w == nil && r.Warmup != nil:
			t.Errorf("%s: warm-up %+v, want none", c.Name, *r.Warmup)
		case w != nil && (r.Warmup == nil || !near(r.Warmup.Seconds, w.Seconds) || r.Warmup.TasksOK != w.TasksOK ||
			!sameLatency(r.Warmup.LatencySeconds, w.LatencySeconds)):
			t.Errorf("%s: warm-up %+v, want %+v", c.Name, r.Warmup, *w)
		}
	}
}

func TestSharedHalvings(t *testing.T) {
	for _, c := range loadArrivalCases(t).Halvings {
		if got := c.Timeline.halved(); !sameTimeline(got, c.Halved) {
			t.Errorf("%s: %+v, want %+v", c.Name, got, c.Halved)
		}
	}
}

func TestSharedGeneratorVerdicts(t *testing.T) {
	for _, c := range loadArrivalCases(t).Generators {
		var times taskTimes
		for k := range c.Scheduled {
			times.scheduled = append(times.scheduled, seconds(c.Scheduled[k]))
			times.issued = append(times.issued, seconds(c.Issued[k]))
		}
		v := judgeGenerator(&times, mustDuration(t, c.Duration), mustDuration(t, c.MaxLag), seconds(c.Warmup))
		got := fmt.Sprintf("rate %v achieved %v lag %+v saturated %v", v.rate, v.achieved, v.lag, v.saturation != nil)
		if !near(v.rate, c.Rate) || !near(v.achieved, c.Achieved) || !near(v.lag.P50, c.Lag.P50) ||
			!near(v.lag.P99, c.Lag.P99) || !near(v.lag.Max, c.Lag.Max) || (v.saturation != nil) != c.Saturated {
			t.Errorf("%s: %s, want rate %v achieved %v lag %+v saturated %v", c.Name, got, c.Rate, c.Achieved, c.Lag, c.Saturated)
		}
		if v.saturation != nil && (len([]rune(*v.saturation)) > maxSaturationRunes || *v.saturation == "") {
			t.Errorf("%s: saturation %q", c.Name, *v.saturation)
		}
	}
}
