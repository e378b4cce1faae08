package runner

import (
	"slices"
	"sort"
	"time"
)

// Latency is the Result's latencySeconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// failedTask marks a failed task's slot: its time is no latency.
const failedTask time.Duration = -1

// latencies sorts durations in place and returns nearest-rank percentiles of
// the successful tasks, to significantDigits as the Python runner writes them.
func latencies(durations []time.Duration) Latency {
	slices.Sort(durations)
	durations = durations[sort.Search(len(durations), func(i int) bool { return durations[i] >= 0 }):]
	if len(durations) == 0 {
		return Latency{}
	}
	return Latency{
		P50: significant(nearestRank(durations, 50).Seconds()),
		P90: significant(nearestRank(durations, 90).Seconds()),
		P99: significant(nearestRank(durations, 99).Seconds()),
		Max: significant(durations[len(durations)-1].Seconds()),
	}
}

// nearestRank is the smallest value with at least p% of values at or below
// it: sorted[ceil(p*n/100)-1], in integers so no rounding error moves a rank.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
