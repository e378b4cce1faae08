package metrics

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// shardCount spreads the per-task counters over several cache lines: tasks
// on different CPUs then rarely write the same line, which is what makes
// shared atomics expensive. A power of two.
const shardCount = 16

// Outcome is how a task ended: it succeeded, or it failed under one of the contract's failure
// kinds (runner-contract.json failureKinds, CONTRACT.md "Failed tasks and their kinds").
type Outcome uint8

// A task's outcomes: Succeeded, or one failure kind each, in the contract's order.
const (
	Succeeded     Outcome = iota
	FailedConnect         // no connection: refused, unreachable, not resolved, reset before the request went out
	FailedTimeout         // the request's time bound passed before the whole answer was read
	FailedTLS             // the TLS handshake or the certificate check failed
	FailedStatus          // an answer whose status is not one counted as success
	FailedOther           // anything else
)

// FailureKinds are the contract's failure kinds, the label values of cxlab_task_failures_total,
// in Outcome order: FailureKinds[o-1] is the kind of o.
var FailureKinds = [...]string{"connect", "timeout", "tls", "status", "other"}

// Kind is the contract's name of a failed outcome, "" for Succeeded.
func (o Outcome) Kind() string {
	if o == Succeeded || int(o) > len(FailureKinds) {
		return ""
	}
	return FailureKinds[o-1]
}

// Failures counts failed tasks by kind, in FailureKinds' order.
type Failures [len(FailureKinds)]int64

// Total is the failed tasks of every kind.
func (f Failures) Total() (n int64) {
	for _, c := range f {
		n += c
	}
	return n
}

// shard holds one slice of the task counters and the duration and wait histograms. A failed
// task is counted under its kind only; the failed tasks are their sum, so the two never
// disagree.
type shard struct {
	started, ok    atomic.Int64
	failed         [len(FailureKinds)]atomic.Int64
	duration, wait histogramShard
	_              [64]byte // keep the next shard off these cache lines
}

// histogramShard is one shard's part of a histogram on the contract's buckets.
type histogramShard struct {
	sumNanos atomic.Int64
	buckets  [len(Buckets) + 1]atomic.Uint64 // not cumulative; last is +Inf
}

// observe counts d in the first bucket whose bound is >= d (le semantics).
func (h *histogramShard) observe(bounds []time.Duration, d time.Duration) {
	i, _ := slices.BinarySearch(bounds, d)
	h.buckets[i].Add(1)
	h.sumNanos.Add(int64(d))
}

// taskCounters counts tasks and their durations, lock-free and sharded;
// Prometheus sees totals built at scrape time. It also reports whether the
// trial has finished, read before the counts: a registry collects its
// collectors concurrently, so apart, a scrape could pair finished 1 with the
// counts from before the last task ended (seen under load).
type taskCounters struct {
	shards [shardCount]shard
	bounds []time.Duration // Buckets in nanoseconds, exact for the contract's bounds
	ended  atomic.Bool     // the trial's task phase is over

	duration, wait, completed, failures, inFlightDesc, finishedDesc *prometheus.Desc
}

func newTaskCounters() *taskCounters {
	c := &taskCounters{
		duration: prometheus.NewDesc("cxlab_task_duration_seconds",
			"Latency of each successful task, from its scheduled start for arrivals.", nil, nil),
		wait: prometheus.NewDesc("cxlab_task_queue_wait_seconds",
			"Each started arrival's wait for a worker since its scheduled start.", nil, nil),
		completed: prometheus.NewDesc("cxlab_tasks_completed_total", "Tasks finished, by outcome.",
			[]string{"outcome"}, nil),
		failures: prometheus.NewDesc("cxlab_task_failures_total",
			"Failed tasks, by kind: connect, timeout, tls, status or other.", []string{"kind"}, nil),
		inFlightDesc: prometheus.NewDesc("cxlab_tasks_in_flight", "Tasks started and not finished.", nil, nil),
		finishedDesc: prometheus.NewDesc("cxlab_trial_finished", "1 once every task has ended.", nil, nil),
	}
	for _, b := range Buckets {
		c.bounds = append(c.bounds, time.Duration(b*float64(time.Second)))
	}
	return c
}

// started counts a task in flight.
func (c *taskCounters) started(id int) { c.shards[id&(shardCount-1)].started.Add(1) }

// waited observes an arrival's wait for a worker since its scheduled start (only arrivals
// have one: the Python runner observes nothing else either).
func (c *taskCounters) waited(id int, wait time.Duration) {
	c.shards[id&(shardCount-1)].wait.observe(c.bounds, wait)
}

// finished counts a task, a failed one under its kind; like the Python runner, only
// successful tasks are observed in the duration histogram (a refused connection is not a
// latency). An outcome past the known kinds counts as other.
func (c *taskCounters) finished(id int, d time.Duration, outcome Outcome) {
	s := &c.shards[id&(shardCount-1)]
	if outcome != Succeeded {
		s.failed[min(int(outcome), len(FailureKinds))-1].Add(1)
		return
	}
	s.duration.observe(c.bounds, d)
	s.ok.Add(1)
}

// counts are the tasks finished so far: the successful ones and the failed ones by kind.
func (c *taskCounters) counts() (ok int64, failed Failures) {
	for i := range c.shards {
		ok += c.shards[i].ok.Load()
		for k := range failed {
			failed[k] += c.shards[i].failed[k].Load()
		}
	}
	return ok, failed
}

// inFlight is the tasks started and not finished, given the finished ones read before (so it
// is never negative).
func (c *taskCounters) inFlight(ok int64, failed Failures) int64 {
	var started int64
	for i := range c.shards {
		started += c.shards[i].started.Load()
	}
	return started - ok - failed.Total()
}

func (c *taskCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.duration
	ch <- c.wait
	ch <- c.completed
	ch <- c.failures
	ch <- c.inFlightDesc
	ch <- c.finishedDesc
}

// Collect reports finished first, then the counts: once finished is 1 they
// are final. The failed tasks and their kinds come from one read, so they always sum; every
// kind is reported, 0 until a task fails so.
func (c *taskCounters) Collect(ch chan<- prometheus.Metric) {
	finished := 0.0
	if c.ended.Load() {
		finished = 1
	}
	ch <- prometheus.MustNewConstMetric(c.finishedDesc, prometheus.GaugeValue, finished)
	ok, failed := c.counts()
	ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(failed.Total()), "failed")
	for k, kind := range FailureKinds {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(failed[k]), kind)
	}
	ch <- prometheus.MustNewConstMetric(c.inFlightDesc, prometheus.GaugeValue, float64(c.inFlight(ok, failed)))
	ch <- c.histogram(c.duration, func(s *shard) *histogramShard { return &s.duration })
	ch <- c.histogram(c.wait, func(s *shard) *histogramShard { return &s.wait })
}

// histogram sums one histogram over the shards. Its count is the sum of its buckets, so the
// two always agree.
func (c *taskCounters) histogram(desc *prometheus.Desc, of func(*shard) *histogramShard) prometheus.Metric {
	counts := make([]uint64, len(Buckets)+1)
	var sum int64
	for i := range c.shards {
		h := of(&c.shards[i])
		for j := range counts {
			counts[j] += h.buckets[j].Load()
		}
		sum += h.sumNanos.Load()
	}
	cumulative := make(map[float64]uint64, len(Buckets))
	var total uint64
	for j, b := range Buckets {
		total += counts[j]
		cumulative[b] = total
	}
	total += counts[len(Buckets)]
	return prometheus.MustNewConstHistogram(desc, total, time.Duration(sum).Seconds(), cumulative)
}
