// Package metrics exports a trial's progress and the process's resource use
// as the Prometheus metrics named in CONTRACT.md, on a registry the caller
// owns (never the global one: the endpoint must carry nothing else).
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets of cxlab_task_duration_seconds, from the contract.
var Buckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Info labels cxlab_trial_info.
type Info struct {
	Experiment, Trial, Pod, Model, Workload string
	Workers                                 int
	GOMAXPROCS                              string // "" when not applicable
	Runtime                                 string
	Tasks                                   int // planned: arrivals scheduled; 0 for a closed loop for a duration
	// Rate is an arrival run's scheduled rate r(t) at t into the task phase, per second; nil
	// without arrivals.
	Rate func(elapsed time.Duration) float64
}

// Trial is the live state of one trial. Tasks update sharded atomics only;
// everything else is computed when scraped, so the instrument costs next to
// nothing per task.
type Trial struct {
	tasks    *taskCounters // with finished
	arrivals *arrivalCounters
	rate     func(time.Duration) float64

	mu         sync.Mutex
	start, end time.Time
}

// NewTrial registers the trial and process metrics on reg.
func NewTrial(reg prometheus.Registerer, info Info) (*Trial, error) {
	t := &Trial{tasks: newTaskCounters(), arrivals: newArrivalCounters(), rate: info.Rate}
	infoGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cxlab_trial_info",
		Help: "Labels describing the trial; always 1.",
		ConstLabels: prometheus.Labels{
			"experiment": info.Experiment,
			"trial":      info.Trial,
			"pod_index":  info.Pod,
			"model":      info.Model,
			"workload":   info.Workload,
			"workers":    strconv.Itoa(info.Workers),
			"gomaxprocs": info.GOMAXPROCS,
			"runtime":    info.Runtime,
		},
	})
	infoGauge.Set(1)
	tasks := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cxlab_trial_tasks",
		Help: "Tasks planned (arrivals scheduled; 0 for a closed loop for a duration).",
	})
	tasks.Set(float64(info.Tasks))
	collectors := []prometheus.Collector{
		infoGauge,
		tasks,
		t.tasks, // completed, in flight, durations and finished, as one snapshot
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cxlab_trial_elapsed_seconds",
			Help: "Time since the task phase began, frozen when it ends.",
		}, func() float64 { return t.Elapsed().Seconds() }),
		t.arrivals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cxlab_arrival_rate",
			Help: "The scheduled arrival rate now, per second (0 without arrivals).",
		}, t.rateNow),
		NewProcessCollector(),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Begin marks the start of the task phase.
func (t *Trial) Begin(start time.Time) {
	t.mu.Lock()
	t.start = start
	t.mu.Unlock()
}

// End marks the end of the task phase: elapsed freezes, finished becomes 1.
func (t *Trial) End(end time.Time) {
	t.mu.Lock()
	t.end = end
	t.mu.Unlock()
	t.tasks.ended.Store(true)
}

// Elapsed is the time since Begin, or the task phase's length after End.
func (t *Trial) Elapsed() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.start.IsZero():
		return 0
	case t.end.IsZero():
		return time.Since(t.start)
	default:
		return t.end.Sub(t.start)
	}
}

// rateNow is the schedule's rate during the task phase, 0 before and after it.
func (t *Trial) rateNow() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == nil || t.start.IsZero() || !t.end.IsZero() {
		return 0
	}
	return t.rate(time.Since(t.start))
}

// TaskStarted counts task id of a closed loop (or burst) in flight.
func (t *Trial) TaskStarted(id int) { t.tasks.started(id) }

// ArrivalIssued counts an arrival handed on to the workers and returns the arrivals now
// waiting for one, itself included.
func (t *Trial) ArrivalIssued() (queued int64) {
	t.arrivals.issued.Add(1)
	return t.arrivals.queued.Add(1)
}

// ArrivalDropped counts an arrival issued with every worker busy and dropped: never run.
func (t *Trial) ArrivalDropped() {
	t.arrivals.dropped.Add(1)
	t.arrivals.issued.Add(1)
}

// ArrivalStarted counts arrival id in flight, taken from the queue after waiting wait since
// its scheduled start.
func (t *Trial) ArrivalStarted(id int, wait time.Duration) {
	t.arrivals.queued.Add(-1)
	t.tasks.waited(id, wait)
	t.tasks.started(id)
}

// TaskFinished records that task id ended after d, its latency (from the scheduled start for
// an arrival), succeeded or failed under a kind.
func (t *Trial) TaskFinished(id int, d time.Duration, outcome Outcome) {
	t.tasks.finished(id, d, outcome)
}

// Counts returns the tasks finished so far.
func (t *Trial) Counts() (ok, failed int64) {
	ok, failures := t.tasks.counts()
	return ok, failures.Total()
}

// Outcomes returns the tasks finished so far, the failed ones by kind (they sum to Counts'
// failed), from one read.
func (t *Trial) Outcomes() (ok int64, failed Failures) { return t.tasks.counts() }
