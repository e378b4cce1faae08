package runner

import (
	"slices"
	"time"
)

// Latency is the Result's latencySeconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// latencies sorts durations in place and returns nearest-rank percentiles.
func latencies(durations []time.Duration) Latency {
	if len(durations) == 0 {
		return Latency{}
	}
	slices.Sort(durations)
	return Latency{
		P50: nearestRank(durations, 50).Seconds(),
		P90: nearestRank(durations, 90).Seconds(),
		P99: nearestRank(durations, 99).Seconds(),
		Max: durations[len(durations)-1].Seconds(),
	}
}

// nearestRank is the smallest value with at least p% of values at or below
// it: sorted[ceil(p*n/100)-1], in integers so no rounding error moves a rank.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
