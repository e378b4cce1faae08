package runner

import (
	"math"
	"strconv"
	"time"
)

// The Result's latencyHistogram (CONTRACT.md, "The latency histogram"): exponential buckets
// of base 2^(2^-schema), from runner-contract.json's latencyHistogram.
const (
	initialSchema = 5
	minSchema     = -4
	maxBuckets    = 100
)

// significantDigits: latencies and what is drawn from them (latencySeconds, the histograms'
// sum, min and max, the timeline's p99, the lag) are written to this many significant digits,
// never to fixed decimals, which would write 1.4 µs as 1 µs (runner-contract.json's
// latencyFigures; cxlab_contract/figures.py).
const significantDigits = 9

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
		coarser := map[int]int64{}
		for i, n := range buckets {
			coarser[lower(i)] += n
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
	h.Sum, h.Min, h.Max = significant(h.Sum), significant(h.Min), significant(h.Max)
	return h
}

// lower is bucket i one schema down: buckets 2j-1 and 2j become j, i.e. i -> ceil(i/2).
func lower(i int) int { return (i + 1) >> 1 }

// lowered is h one schema down, its sum, min and max unchanged: one step of the cut of an
// oversized Result (Result.Encode).
func (h Histogram) lowered() Histogram {
	out := h
	out.Schema--
	out.Counts = []int64{}
	if len(h.Counts) > 0 {
		out.Offset = lower(h.Offset)
		out.Counts = make([]int64, lower(h.Offset+len(h.Counts)-1)-out.Offset+1)
		for k, n := range h.Counts {
			out.Counts[lower(h.Offset+k)-out.Offset] += n
		}
	}
	return out
}

func span(buckets map[int]int64) (low, high int) {
	low, high = math.MaxInt, math.MinInt
	for i := range buckets {
		low, high = min(low, i), max(high, i)
	}
	return low, high
}

func round6(v float64) float64 { return roundTo(v, 6) }

// significant is v to significantDigits significant digits, from its exact decimal value,
// half to even on a true tie, as Python's f"{v:.9g}" (cxlab_contract.figures.significant).
func significant(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', significantDigits, 64), 64) // always parses
	return r
}

// roundTo rounds v to n decimals from its exact decimal value, half to even on a true tie, as
// Python's round(v, n) does: math.Round(v*1e6)/1e6 would round v*1e6 first, and the two
// runners could then differ in the last decimal.
func roundTo(v float64, n int) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', n, 64), 64) // always parses
	return r
}
