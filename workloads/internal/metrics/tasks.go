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

// shard holds one slice of the task counters and the duration and wait histograms.
type shard struct {
	started, ok, failed atomic.Int64
	duration, wait      histogramShard
	_                   [64]byte // keep the next shard off these cache lines
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

	duration, wait, completed, inFlightDesc, finishedDesc *prometheus.Desc
}

func newTaskCounters() *taskCounters {
	c := &taskCounters{
		duration: prometheus.NewDesc("cxlab_task_duration_seconds",
			"Latency of each successful task, from its scheduled start for arrivals.", nil, nil),
		wait: prometheus.NewDesc("cxlab_task_queue_wait_seconds",
			"Each started arrival's wait for a worker since its scheduled start.", nil, nil),
		completed: prometheus.NewDesc("cxlab_tasks_completed_total", "Tasks finished, by outcome.",
			[]string{"outcome"}, nil),
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

// finished counts a task; like the Python runner, only successful tasks are
// observed in the duration histogram (a refused connection is not a latency).
func (c *taskCounters) finished(id int, d time.Duration, ok bool) {
	s := &c.shards[id&(shardCount-1)]
	if !ok {
		s.failed.Add(1)
		return
	}
	s.duration.observe(c.bounds, d)
	s.ok.Add(1)
}

func (c *taskCounters) counts() (ok, failed int64) {
	for i := range c.shards {
		ok += c.shards[i].ok.Load()
		failed += c.shards[i].failed.Load()
	}
	return ok, failed
}

func (c *taskCounters) inFlight() int64 {
	ok, failed := c.counts() // finished first, so in flight is never negative
	var started int64
	for i := range c.shards {
		started += c.shards[i].started.Load()
	}
	return started - ok - failed
}

func (c *taskCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.duration
	ch <- c.wait
	ch <- c.completed
	ch <- c.inFlightDesc
	ch <- c.finishedDesc
}

// Collect reports finished first, then the counts: once finished is 1 they
// are final.
func (c *taskCounters) Collect(ch chan<- prometheus.Metric) {
	finished := 0.0
	if c.ended.Load() {
		finished = 1
	}
	ch <- prometheus.MustNewConstMetric(c.finishedDesc, prometheus.GaugeValue, finished)
	ok, failed := c.counts()
	ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(failed), "failed")
	ch <- prometheus.MustNewConstMetric(c.inFlightDesc, prometheus.GaugeValue, float64(c.inFlight()))
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
