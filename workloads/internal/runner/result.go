package runner

import (
	"bytes"
	"encoding/json"

	"cxlab.dev/workloads/internal/measure"
)

// Schema identifies the Result format (python/cxlab_contract/result-v1.schema.json).
const Schema = "cxlab.dev/result/v1"

// MaxResultBytes is the bound on an encoded Result: a Pod termination
// message holds 4096 bytes.
const MaxResultBytes = 4096

// Result is the contract's Result. Pointers are the fields that are null
// when they do not apply.
type Result struct {
	Schema                     string   `json:"schema"`
	Experiment                 string   `json:"experiment"`
	Trial                      string   `json:"trial"`
	Pods                       int      `json:"pods"`     // 1: a runner's own Result
	PodIndex                   *int     `json:"podIndex"` // --pod
	Model                      string   `json:"model"`
	Workload                   string   `json:"workload"`
	Workers                    int      `json:"workers"`
	Pool                       *string  `json:"pool"` // threads and processes only: null here
	WorkersStarted             int      `json:"workersStarted"`
	GOMAXPROCS                 *int     `json:"gomaxprocs"`
	Tasks                      int      `json:"tasks"`
	RTTSeconds                 *float64 `json:"rttSeconds"`
	Iterations                 *int     `json:"iterations"`
	HoldSeconds                *float64 `json:"holdSeconds"`
	TasksOK                    int64    `json:"tasksOk"`
	TasksFailed                int64    `json:"tasksFailed"`
	WallSeconds                float64  `json:"wallSeconds"`
	StartedAtUnixSeconds       float64  `json:"startedAtUnixSeconds"`
	BarrierWaitSeconds         *float64 `json:"barrierWaitSeconds"` // null without a barrier
	StartSkewSeconds           *float64 `json:"startSkewSeconds"`   // a merged Result's only
	LocustWorkers              *int     `json:"locustWorkers"`      // a Locust master's only
	FloorSeconds               *float64 `json:"floorSeconds"`
	Efficiency                 *float64 `json:"efficiency"`
	CPUUserSeconds             float64  `json:"cpuUserSeconds"`
	CPUSystemSeconds           float64  `json:"cpuSystemSeconds"`
	CPUPercent                 float64  `json:"cpuPercent"`
	PeakRSSBytes               int64    `json:"peakRssBytes"`
	PeakVMBytes                int64    `json:"peakVmBytes"`
	BaselineRSSBytes           int64    `json:"baselineRssBytes"`
	PeakThreads                int64    `json:"peakThreads"`
	VoluntaryContextSwitches   int64    `json:"voluntaryContextSwitches"`
	InvoluntaryContextSwitches int64    `json:"involuntaryContextSwitches"`
	// TaskContextSwitches is null: goroutines share the runtime's threads with
	// the metrics server, so no thread is the tasks' own.
	TaskContextSwitches *struct{}    `json:"taskContextSwitches"`
	Syscalls            *Syscalls    `json:"syscalls"`
	ThroughputPerSecond float64      `json:"throughputPerSecond"`
	LatencySeconds      Latency      `json:"latencySeconds"`
	LatencyHistogram    Histogram    `json:"latencyHistogram"`
	DurationSeconds     *float64     `json:"durationSeconds"` // duration runs only, as the three below
	Arrival             *Arrival     `json:"arrival"`         // arrival runs only
	Timeline            *Timeline    `json:"timeline"`
	Warmup              *Warmup      `json:"warmup"` // with --warmup
	RSSTimeline         RSSTimeline  `json:"rssTimeline"`
	CPUs                []int        `json:"cpus"`
	Runtime             string       `json:"runtime"`
	Errors              []ErrorCount `json:"errors"`
	// Host is the environment fingerprint (measure.ReadHost), never cut from an oversized
	// Result; nil, and left out, only in a Result read from one written before it.
	Host *measure.Host `json:"host,omitempty"`
	// FailureKinds is the failed tasks by kind, summing to TasksFailed; never cut from an
	// oversized Result. Nil, and left out, only in a Result read from one written before it.
	FailureKinds *FailureKinds `json:"failureKinds,omitempty"`
}

// Syscalls is the Result's syscalls when they were asked for: this runner
// does not trace itself, so it says why they are unavailable.
type Syscalls struct {
	Unavailable string `json:"unavailable"`
}

// RSSTimeline is the Result's rssTimeline.
type RSSTimeline struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	RSSBytes        []int64 `json:"rssBytes"`
}

// Encode returns the Result as one line of compact JSON, newline included, of
// at most MaxResultBytes: if it would not fit, it drops errors (least frequent
// first), then halves the RSS timeline's resolution, then the timeline's, then
// lowers the schema of the widest histogram; nothing else is cut (the labels,
// the host and the failure kinds stay whole). The contract's rule, the same in the Python
// runner. The caller's Result is left as it was.
func (r Result) Encode() ([]byte, error) {
	for {
		b, err := r.encode()
		if err != nil || len(b) <= MaxResultBytes {
			return b, err
		}
		switch {
		case len(r.Errors) > 0:
			r.Errors = r.Errors[:len(r.Errors)-1]
		case len(r.RSSTimeline.RSSBytes) > 1:
			r.RSSTimeline = r.RSSTimeline.halved()
		case r.Timeline != nil && len(r.Timeline.Completed) > 1:
			halved := r.Timeline.halved()
			r.Timeline = &halved
		case !r.lowerWidestHistogram():
			return b, nil // nothing left to cut; only absurd labels get here
		}
	}
}

// lowerWidestHistogram lowers by one the schema of whichever of the latency, wait and service
// histograms has the most buckets (the first of them on a tie), on a copy of the arrival;
// false when none has two buckets left to merge.
func (r *Result) lowerWidestHistogram() bool {
	widest := &r.LatencyHistogram
	if r.Arrival != nil {
		arrival := *r.Arrival
		r.Arrival = &arrival
		for _, h := range []*Histogram{&arrival.WaitHistogram, &arrival.ServiceHistogram} {
			if len(h.Counts) > len(widest.Counts) {
				widest = h
			}
		}
	}
	if len(widest.Counts) < 2 || widest.Schema <= minSchema {
		return false
	}
	*widest = widest.lowered()
	return true
}

func (r Result) encode() ([]byte, error) {
	// Never null where the schema wants an array.
	if r.Errors == nil {
		r.Errors = []ErrorCount{}
	}
	if r.RSSTimeline.RSSBytes == nil {
		r.RSSTimeline.RSSBytes = []int64{}
	}
	if r.CPUs == nil {
		r.CPUs = []int{}
	}
	if r.LatencyHistogram.Counts == nil {
		r.LatencyHistogram.Counts = []int64{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <, > and & one byte each in messages
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (t RSSTimeline) halved() RSSTimeline {
	out := RSSTimeline{IntervalSeconds: t.IntervalSeconds * 2}
	for i := 0; i < len(t.RSSBytes); i += 2 {
		out.RSSBytes = append(out.RSSBytes, t.RSSBytes[i])
	}
	return out
}
