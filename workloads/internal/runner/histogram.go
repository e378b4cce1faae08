package runner

import (
	"math"
	"time"
)

// The Result's latencyHistogram (CONTRACT.md, "The latency histogram"): exponential buckets
// of base 2^(2^-schema), from runner-contract.json's latencyHistogram.
const (
	initialSchema = 5
	minSchema     = -4
	maxBuckets    = 100
)

// Histogram is the Result's latencyHistogram: counts[k] is bucket offset+k, which holds the
// latencies v with base^(i-1) < v <= base^i.
type Histogram struct {
	Schema    int     `json:"schema"`
	ZeroCount int64   `json:"zeroCount"`
	Offset    int     `json:"offset"`
	Counts    []int64 `json:"counts"`
	Sum       float64 `json:"sum"`
	Min       float64 `json:"min"`
	Max       float64 `json:"max"`
}

// bucketIndex is the bucket of v > 0 at schema >= 0, from frexp so that powers of two land
// exactly on their boundary (cxlab_contract.histogram.bucket_index, which the Python runner uses).
func bucketIndex(v float64, schema int) int {
	frac, exp := math.Frexp(v)
	if frac == 0.5 {
		return (exp - 1) << schema
	}
	return exp<<schema + int(math.Ceil(math.Log2(frac)*float64(int(1)<<schema)))
}

// buildHistogram is the histogram of the successful tasks' durations (failed ones are
// failedTask, below 0).
func buildHistogram(durations []time.Duration) Histogram {
	buckets := map[int]int64{}
	h := Histogram{Schema: initialSchema}
	first := true
	for _, d := range durations {
		if d < 0 {
			continue
		}
		v := d.Seconds()
		h.Sum += v
		if first || v < h.Min {
			h.Min = v
		}
		h.Max = max(h.Max, v)
		first = false
		if v == 0 {
			h.ZeroCount++
			continue
		}
		buckets[bucketIndex(v, initialSchema)]++
	}
	for len(buckets) > 0 && h.Schema > minSchema {
		low, high := span(buckets)
		if high-low+1 <= maxBuckets {
			break
		}
		// One schema down: buckets 2j-1 and 2j become j, i.e. i -> ceil(i/2).
		coarser := map[int]int64{}
		for i, n := range buckets {
			coarser[(i+1)>>1] += n
		}
		buckets, h.Schema = coarser, h.Schema-1
	}
	h.Counts = []int64{}
	if len(buckets) > 0 {
		low, high := span(buckets)
		h.Offset = low
		for i := low; i <= high; i++ {
			h.Counts = append(h.Counts, buckets[i])
		}
	}
	h.Sum, h.Min, h.Max = round6(h.Sum), round6(h.Min), round6(h.Max)
	return h
}

func span(buckets map[int]int64) (low, high int) {
	low, high = math.MaxInt, math.MinInt
	for i := range buckets {
		low, high = min(low, i), max(high, i)
	}
	return low, high
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
