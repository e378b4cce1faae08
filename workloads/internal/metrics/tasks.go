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

// shard holds one slice of the task counters and duration histogram.
type shard struct {
	started, ok, failed atomic.Int64
	sumNanos            atomic.Int64
	buckets             [len(Buckets) + 1]atomic.Uint64 // not cumulative; last is +Inf
	_                   [64]byte                        // keep the next shard off these cache lines
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

	duration, completed, inFlightDesc, finishedDesc *prometheus.Desc
}

func newTaskCounters() *taskCounters {
	c := &taskCounters{
		duration: prometheus.NewDesc("cxlab_task_duration_seconds", "Duration of each successful task.", nil, nil),
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

func (c *taskCounters) started(id int) { c.shards[id&(shardCount-1)].started.Add(1) }

// finished counts a task; like the Python runner, only successful tasks are
// observed in the duration histogram (a refused connection is not a latency).
func (c *taskCounters) finished(id int, d time.Duration, ok bool) {
	s := &c.shards[id&(shardCount-1)]
	if !ok {
		s.failed.Add(1)
		return
	}
	i, _ := slices.BinarySearch(c.bounds, d) // first bound >= d: le semantics
	s.buckets[i].Add(1)
	s.sumNanos.Add(int64(d))
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
	ch <- c.completed
	ch <- c.inFlightDesc
	ch <- c.finishedDesc
}

// Collect reports finished first, then the counts: once finished is 1 they
// are final. The histogram's count is the sum of its buckets, so the two
// always agree.
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
	counts := make([]uint64, len(Buckets)+1)
	var sum int64
	for i := range c.shards {
		s := &c.shards[i]
		for j := range counts {
			counts[j] += s.buckets[j].Load()
		}
		sum += s.sumNanos.Load()
	}
	cumulative := make(map[float64]uint64, len(Buckets))
	var total uint64
	for j, b := range Buckets {
		total += counts[j]
		cumulative[b] = total
	}
	total += counts[len(Buckets)]
	ch <- prometheus.MustNewConstHistogram(c.duration, total, time.Duration(sum).Seconds(), cumulative)
}
