package metrics

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestTrial(t *testing.T) (*prometheus.Registry, *Trial) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry() // every series collected must be described
	tr, err := NewTrial(reg, Info{Experiment: "exp", Trial: "t1", Pod: "3", Model: "goroutines", Workload: "sleep",
		Workers: 4, GOMAXPROCS: "2", Runtime: "go1.26.0", Tasks: 3})
	if err != nil {
		t.Fatal(err)
	}
	return reg, tr
}

// The endpoint carries the contract's metrics and nothing else.
func TestExactlyTheContractMetrics(t *testing.T) {
	reg, _ := newTestTrial(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType().String()
	}
	want := map[string]string{
		"cxlab_trial_info":               "GAUGE",
		"cxlab_trial_tasks":              "GAUGE",
		"cxlab_tasks_completed_total":    "COUNTER",
		"cxlab_task_failures_total":      "COUNTER",
		"cxlab_tasks_in_flight":          "GAUGE",
		"cxlab_task_duration_seconds":    "HISTOGRAM",
		"cxlab_cpu_user_seconds_total":   "COUNTER",
		"cxlab_cpu_system_seconds_total": "COUNTER",
		"cxlab_rss_bytes":                "GAUGE",
		"cxlab_peak_rss_bytes":           "GAUGE",
		"cxlab_threads":                  "GAUGE",
		"cxlab_context_switches_total":   "COUNTER",
		"cxlab_trial_elapsed_seconds":    "GAUGE",
		"cxlab_trial_finished":           "GAUGE",
		"cxlab_arrivals_total":           "COUNTER",
		"cxlab_arrivals_dropped_total":   "COUNTER",
		"cxlab_arrival_queue_length":     "GAUGE",
		"cxlab_arrival_rate":             "GAUGE",
		"cxlab_task_queue_wait_seconds":  "HISTOGRAM",
	}
	if !maps.Equal(types, want) {
		t.Errorf("got %v\nwant %v", types, want)
	}
	if n := testutil.CollectAndCount(NewProcessCollector(), "cxlab_context_switches_total"); n != 2 {
		t.Errorf("%d context-switch series, want voluntary and involuntary", n)
	}
}

func TestMetricsLint(t *testing.T) {
	reg, _ := newTestTrial(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestTaskMetrics(t *testing.T) {
	reg, tr := newTestTrial(t)
	start := time.Now()
	tr.Begin(start)
	for id := range 3 {
		tr.TaskStarted(id)
	}
	tr.TaskFinished(0, 30*time.Millisecond, Succeeded)
	tr.TaskFinished(1, 2*time.Second, FailedTimeout)     // failed: counted, not observed
	tr.TaskFinished(17, 500*time.Microsecond, Succeeded) // on a bound: counted in le="0.0005"

	want := `
# HELP cxlab_tasks_completed_total Tasks finished, by outcome.
# TYPE cxlab_tasks_completed_total counter
cxlab_tasks_completed_total{outcome="failed"} 1
cxlab_tasks_completed_total{outcome="ok"} 2
# HELP cxlab_tasks_in_flight Tasks started and not finished.
# TYPE cxlab_tasks_in_flight gauge
cxlab_tasks_in_flight 0
# HELP cxlab_trial_finished 1 once every task has ended.
# TYPE cxlab_trial_finished gauge
cxlab_trial_finished 0
# HELP cxlab_trial_tasks Tasks planned (arrivals scheduled; 0 for a closed loop for a duration).
# TYPE cxlab_trial_tasks gauge
cxlab_trial_tasks 3
# HELP cxlab_trial_info Labels describing the trial; always 1.
# TYPE cxlab_trial_info gauge
cxlab_trial_info{experiment="exp",gomaxprocs="2",model="goroutines",pod_index="3",runtime="go1.26.0",trial="t1",workers="4",workload="sleep"} 1
# HELP cxlab_task_duration_seconds Latency of each successful task, from its scheduled start for arrivals.
# TYPE cxlab_task_duration_seconds histogram
cxlab_task_duration_seconds_bucket{le="0.0005"} 1
cxlab_task_duration_seconds_bucket{le="0.001"} 1
cxlab_task_duration_seconds_bucket{le="0.0025"} 1
cxlab_task_duration_seconds_bucket{le="0.005"} 1
cxlab_task_duration_seconds_bucket{le="0.01"} 1
cxlab_task_duration_seconds_bucket{le="0.025"} 1
cxlab_task_duration_seconds_bucket{le="0.05"} 2
cxlab_task_duration_seconds_bucket{le="0.1"} 2
cxlab_task_duration_seconds_bucket{le="0.25"} 2
cxlab_task_duration_seconds_bucket{le="0.5"} 2
cxlab_task_duration_seconds_bucket{le="1"} 2
cxlab_task_duration_seconds_bucket{le="2.5"} 2
cxlab_task_duration_seconds_bucket{le="5"} 2
cxlab_task_duration_seconds_bucket{le="10"} 2
cxlab_task_duration_seconds_bucket{le="30"} 2
cxlab_task_duration_seconds_bucket{le="60"} 2
cxlab_task_duration_seconds_bucket{le="120"} 2
cxlab_task_duration_seconds_bucket{le="300"} 2
cxlab_task_duration_seconds_bucket{le="+Inf"} 2
cxlab_task_duration_seconds_sum 0.0305
cxlab_task_duration_seconds_count 2
`
	names := []string{"cxlab_tasks_completed_total", "cxlab_tasks_in_flight", "cxlab_trial_finished",
		"cxlab_trial_tasks", "cxlab_trial_info", "cxlab_task_duration_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if ok, failed := tr.Counts(); ok != 2 || failed != 1 {
		t.Errorf("Counts() = %d, %d", ok, failed)
	}

	if count, _ := histogram(t, reg, "cxlab_task_queue_wait_seconds"); count != 0 {
		t.Errorf("queue wait: %d observations, want none: only arrivals wait", count)
	}
	if got := gauge(t, reg, "cxlab_arrivals_total") + gauge(t, reg, "cxlab_arrival_rate"); got != 0 {
		t.Errorf("arrivals %v without any", got)
	}

	tr.TaskStarted(5)
	if got := gauge(t, reg, "cxlab_tasks_in_flight"); got != 1 {
		t.Errorf("in flight %v, want 1", got)
	}
	tr.End(start.Add(1500 * time.Millisecond))
	if got := gauge(t, reg, "cxlab_trial_elapsed_seconds"); got != 1.5 {
		t.Errorf("elapsed %v after End, want it frozen at 1.5", got)
	}
	if got := gauge(t, reg, "cxlab_trial_finished"); got != 1 {
		t.Errorf("finished %v after End", got)
	}
}

// Every failure kind is exposed from the start at 0; a failed task counts under its kind only,
// and the kinds sum to the failed tasks.
func TestFailureKindMetrics(t *testing.T) {
	reg, tr := newTestTrial(t)
	zero := `
# HELP cxlab_task_failures_total Failed tasks, by kind: connect, timeout, tls, status or other.
# TYPE cxlab_task_failures_total counter
cxlab_task_failures_total{kind="connect"} 0
cxlab_task_failures_total{kind="other"} 0
cxlab_task_failures_total{kind="status"} 0
cxlab_task_failures_total{kind="timeout"} 0
cxlab_task_failures_total{kind="tls"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(zero), "cxlab_task_failures_total"); err != nil {
		t.Errorf("before any task: %v", err)
	}
	for id, o := range []Outcome{FailedConnect, FailedStatus, FailedStatus, Succeeded, FailedTLS, FailedOther,
		FailedTimeout, FailedStatus, FailedConnect} {
		tr.TaskStarted(id)
		tr.TaskFinished(id, time.Millisecond, o)
	}
	want := `
# HELP cxlab_task_failures_total Failed tasks, by kind: connect, timeout, tls, status or other.
# TYPE cxlab_task_failures_total counter
cxlab_task_failures_total{kind="connect"} 2
cxlab_task_failures_total{kind="other"} 1
cxlab_task_failures_total{kind="status"} 3
cxlab_task_failures_total{kind="timeout"} 1
cxlab_task_failures_total{kind="tls"} 1
# HELP cxlab_tasks_completed_total Tasks finished, by outcome.
# TYPE cxlab_tasks_completed_total counter
cxlab_tasks_completed_total{outcome="failed"} 8
cxlab_tasks_completed_total{outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cxlab_task_failures_total", "cxlab_tasks_completed_total"); err != nil {
		t.Error(err)
	}
	ok, failed := tr.Outcomes()
	if ok != 1 || failed != (Failures{2, 1, 1, 3, 1}) || failed.Total() != 8 {
		t.Errorf("Outcomes() = %d, %v", ok, failed)
	}
	if _, n := tr.Counts(); n != failed.Total() {
		t.Errorf("Counts() failed %d, the kinds sum to %d", n, failed.Total())
	}
	for o, want := range map[Outcome]string{Succeeded: "", FailedConnect: "connect", FailedOther: "other", FailedOther + 1: ""} {
		if got := o.Kind(); got != want {
			t.Errorf("Outcome(%d).Kind() = %q, want %q", o, got, want)
		}
	}
}

func TestProcessMetricsAreReal(t *testing.T) {
	reg, _ := newTestTrial(t)
	if rss := gauge(t, reg, "cxlab_rss_bytes"); rss <= 0 {
		t.Errorf("rss %v", rss)
	}
	if peak, rss := gauge(t, reg, "cxlab_peak_rss_bytes"), gauge(t, reg, "cxlab_rss_bytes"); peak < rss*0.5 {
		t.Errorf("peak rss %v below rss %v", peak, rss)
	}
	if n := gauge(t, reg, "cxlab_threads"); n < 1 {
		t.Errorf("threads %v", n)
	}
	if e := gauge(t, reg, "cxlab_trial_elapsed_seconds"); e != 0 {
		t.Errorf("elapsed %v before Begin", e)
	}
}

// An arrival run's generator and queue: issued, dropped, waiting, each start's wait, and the
// scheduled rate during the task phase only.
func TestArrivalMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := NewTrial(reg, Info{Model: "goroutines", Workload: "sleep", Workers: 2, Tasks: 5,
		Rate: func(elapsed time.Duration) float64 { return 100 + elapsed.Seconds() }})
	if err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "cxlab_arrival_rate"); got != 0 {
		t.Errorf("rate %v before the task phase", got)
	}
	start := time.Now()
	tr.Begin(start)
	for want := int64(1); want <= 3; want++ {
		if got := tr.ArrivalIssued(); got != want {
			t.Errorf("queue %d after issuing %d", got, want)
		}
	}
	tr.ArrivalDropped()
	tr.ArrivalStarted(0, 30*time.Millisecond)
	tr.ArrivalStarted(1, 0)
	tr.TaskFinished(0, 70*time.Millisecond, Succeeded)
	for name, want := range map[string]float64{
		"cxlab_arrivals_total": 4, "cxlab_arrivals_dropped_total": 1, "cxlab_arrival_queue_length": 1,
		"cxlab_trial_tasks": 5, "cxlab_tasks_in_flight": 1,
	} {
		if got := gauge(t, reg, name); got != want {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
	if rate := gauge(t, reg, "cxlab_arrival_rate"); rate < 100 || rate > 110 {
		t.Errorf("rate %v, want r(t) = 100 + t for t since Begin", rate)
	}
	if count, sum := histogram(t, reg, "cxlab_task_queue_wait_seconds"); count != 2 || sum != 0.03 {
		t.Errorf("queue wait: %d observations summing to %v, want 2 summing to 0.03", count, sum)
	}
	if count, sum := histogram(t, reg, "cxlab_task_duration_seconds"); count != 1 || sum != 0.07 {
		t.Errorf("duration: %d observations summing to %v, want the latency from the scheduled start", count, sum)
	}
	tr.End(start.Add(time.Second))
	if got := gauge(t, reg, "cxlab_arrival_rate"); got != 0 {
		t.Errorf("rate %v after the task phase", got)
	}
}

// histogram returns the count and sum of a histogram without labels.
func histogram(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no %s", name)
	return 0, 0
}

// gauge returns the value of the only series of a gauge or counter.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("no %s", name)
	return 0
}
