package runner

import (
	"slices"
	"sort"
	"time"
)

// Latency is the Result's latencySeconds: P97_5 is the 97.5th percentile (the schema's
// p97_5: the decimal point written _).
type Latency struct {
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P97_5 float64 `json:"p97_5"`
	P99   float64 `json:"p99"`
	P99_9 float64 `json:"p99_9"`
	Max   float64 `json:"max"`
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
	at := func(permille int) float64 { return significant(nearestRank(durations, permille).Seconds()) }
	return Latency{
		P50:   at(500),
		P90:   at(900),
		P95:   at(950),
		P97_5: at(975),
		P99:   at(990),
		P99_9: at(999),
		Max:   significant(durations[len(durations)-1].Seconds()),
	}
}

// nearestRank is the smallest value with at least permille/1000 of the values at or below
// it: sorted[ceil(permille*n/1000)-1], in integers so no rounding error moves a rank.
func nearestRank(sorted []time.Duration, permille int) time.Duration {
	rank := (permille*len(sorted) + 999) / 1000
	return sorted[max(rank, 1)-1]
}
