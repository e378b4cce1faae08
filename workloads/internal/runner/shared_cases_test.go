package runner

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// The contract's shared cases (workloads/testdata), the Python half in
// tests/test_contract.py.

// The same oversized Result the Python runner's test truncates (workloads/testdata): both
// runners must cut it to the same document (tests/test_contract.py holds the Python half).
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
		for _, pair := range [][2]float64{{got.Sum, want.Sum}, {got.Min, want.Min}, {got.Max, want.Max}} {
			if math.Abs(pair[0]-pair[1]) > 1e-9 {
				t.Errorf("%s: sum/min/max %v, want %v", c.Name, pair[0], pair[1])
			}
		}
	}
}
