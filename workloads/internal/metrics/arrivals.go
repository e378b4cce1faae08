package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// arrivalCounters are an arrival run's generator and queue (CONTRACT.md, Duration runs),
// exposed in every trial (0 without arrivals) so both runners serve the same names. Issued and
// dropped have one writer, the generator; the queue is one atomic, +1 by the generator and -1
// by the worker that takes the arrival, so the generator reads its exact length.
type arrivalCounters struct {
	issued, dropped atomic.Int64
	queued          atomic.Int64 // issued, not dropped, not started

	issuedDesc, droppedDesc, queueDesc *prometheus.Desc
}

func newArrivalCounters() *arrivalCounters {
	return &arrivalCounters{
		issuedDesc:  prometheus.NewDesc("cxlab_arrivals_total", "Arrivals issued by the generator.", nil, nil),
		droppedDesc: prometheus.NewDesc("cxlab_arrivals_dropped_total", "Arrivals dropped with every worker busy.", nil, nil),
		queueDesc:   prometheus.NewDesc("cxlab_arrival_queue_length", "Arrivals issued and waiting for a worker.", nil, nil),
	}
}

func (c *arrivalCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.issuedDesc
	ch <- c.droppedDesc
	ch <- c.queueDesc
}

func (c *arrivalCounters) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.issuedDesc, prometheus.CounterValue, float64(c.issued.Load()))
	ch <- prometheus.MustNewConstMetric(c.droppedDesc, prometheus.CounterValue, float64(c.dropped.Load()))
	ch <- prometheus.MustNewConstMetric(c.queueDesc, prometheus.GaugeValue, float64(max(0, c.queued.Load())))
}
