package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"cxlab.dev/workloads/internal/measure"
)

// processCollector reads CPU, memory, threads and context switches when
// scraped rather than tracking them.
type processCollector struct {
	user, system, rss, peakRSS, threads, ctxSwitches *prometheus.Desc
}

// NewProcessCollector returns the collector for the process-level metrics of
// the contract (cxlab_cpu_*, cxlab_*rss_bytes, cxlab_threads,
// cxlab_context_switches_total).
func NewProcessCollector() prometheus.Collector {
	return &processCollector{
		user:        prometheus.NewDesc("cxlab_cpu_user_seconds_total", "User CPU time of the process.", nil, nil),
		system:      prometheus.NewDesc("cxlab_cpu_system_seconds_total", "System CPU time of the process.", nil, nil),
		rss:         prometheus.NewDesc("cxlab_rss_bytes", "Resident memory now.", nil, nil),
		peakRSS:     prometheus.NewDesc("cxlab_peak_rss_bytes", "Peak resident memory.", nil, nil),
		threads:     prometheus.NewDesc("cxlab_threads", "OS threads now.", nil, nil),
		ctxSwitches: prometheus.NewDesc("cxlab_context_switches_total", "Context switches of the process, by kind.", []string{"kind"}, nil),
	}
}

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.user, c.system, c.rss, c.peakRSS, c.threads, c.ctxSwitches} {
		ch <- d
	}
}

// Collect leaves out what it cannot read rather than failing the scrape.
func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	rss, rssErr := measure.RSS()
	if rssErr == nil {
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(rss))
	}
	if u, err := measure.ReadUsage(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.user, prometheus.CounterValue, u.User.Seconds())
		ch <- prometheus.MustNewConstMetric(c.system, prometheus.CounterValue, u.System.Seconds())
		ch <- prometheus.MustNewConstMetric(c.peakRSS, prometheus.GaugeValue, float64(max(u.MaxRSSBytes, rss)))
		ch <- prometheus.MustNewConstMetric(c.ctxSwitches, prometheus.CounterValue, float64(u.Voluntary), "voluntary")
		ch <- prometheus.MustNewConstMetric(c.ctxSwitches, prometheus.CounterValue, float64(u.Involuntary), "involuntary")
	}
	if n, err := measure.Threads(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.threads, prometheus.GaugeValue, float64(n))
	}
}
