package runner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Failed tasks have no latency: the histogram, as the percentiles, counts only the others.
func TestTheHistogramLeavesFailedTasksOut(t *testing.T) {
	h := buildHistogram([]time.Duration{failedTask, 250 * time.Millisecond, failedTask, 0})
	if h.ZeroCount != 1 || !slices.Equal(h.Counts, []int64{1}) || h.Offset != bucketIndex(0.25, initialSchema) {
		t.Errorf("zero %d, offset %d, counts %v: want the 0 and the 250 ms only", h.ZeroCount, h.Offset, h.Counts)
	}
	if h.Sum != 0.25 || h.Min != 0 || h.Max != 0.25 {
		t.Errorf("sum %v, min %v, max %v", h.Sum, h.Min, h.Max)
	}
	if h := buildHistogram([]time.Duration{failedTask}); h.Min != 0 || h.Max != 0 || len(h.Counts) != 0 || h.ZeroCount != 0 {
		t.Errorf("only failures: %+v, want an empty histogram", h)
	}
}

// The histogram's stated bound (CONTRACT.md, The latency histogram) from 1 µs to 100 s,
// against the exact figures of the raw durations: min and max to 9 significant digits, and
// the nearest rank v_r (r = max(1, ceil(q x n)) of the sorted values) within
// (base - 1) / (base + 1) at the histogram's schema, read as the contract reads it
// (cxlab_contract.histogram.quantile, which the operator uses): the middle
// 2 x base^i / (base + 1) of the bucket holding rank r, kept within [min, max]. The Python
// half is tests/contract/test_histogram_bounds.py.
func TestTheHistogramKeepsItsBoundFromAMicrosecond(t *testing.T) {
	for _, v := range []time.Duration{time.Microsecond, 1400, 1500, 2500, 1400 * time.Microsecond,
		100 * time.Millisecond, 7770 * time.Millisecond, 100 * time.Second} {
		constant := slices.Repeat([]time.Duration{v}, 50)
		h := buildHistogram(constant)
		if worst := worstError(t, h, constant); worst > digits {
			t.Errorf("a constant %v: off by %.3g, want itself (min %v, max %v)", v, worst, h.Min, h.Max)
		}
	}
	// Spans of log-uniform durations that 100 buckets hold at each schema and not above it.
	spans := map[int]float64{5: 6, 4: 40, 3: 2e3, 2: 4e6, 1: 1e8}
	for schema, ratio := range spans {
		for _, low := range []time.Duration{time.Microsecond, time.Millisecond, time.Second} {
			if low.Seconds()*ratio > 100 {
				continue
			}
			durations := logUniform(low, ratio, 4000, uint64(schema))
			h := buildHistogram(durations)
			if h.Schema != schema {
				t.Fatalf("%v x %v: schema %d, want %d", low, ratio, h.Schema, schema)
			}
			// 4,000 draws put some value close to a bucket's edge: the bound is the real one.
			worst := worstError(t, h, durations)
			t.Logf("schema %d from %v: at most %.5f off, bound %.5f", schema, low, worst, errorBound(schema))
			if worst < 0.9*errorBound(schema) {
				t.Errorf("schema %d from %v: at most %.5f off, the bound %.5f is not reached", schema, low, worst, errorBound(schema))
			}
		}
	}
	// 1 µs to 100 s is schema 1 (17.2 %); an oversized Result's cut lowers it further.
	durations := append(logUniform(time.Microsecond, 1e8, 4000, 28), time.Microsecond, 1400, 1500, 100*time.Second)
	h := buildHistogram(durations)
	if h.Schema != 1 || h.Min != 1e-6 || h.Max != 100 {
		t.Fatalf("1 µs to 100 s: schema %d, min %v, max %v", h.Schema, h.Min, h.Max)
	}
	for ; h.Schema >= minSchema; h = h.lowered() {
		worst := worstError(t, h, durations)
		t.Logf("schema %d: at most %.5f off, bound %.5f", h.Schema, worst, errorBound(h.Schema))
		if worst < 0.99*errorBound(h.Schema) {
			t.Errorf("schema %d: at most %.5f off, the bound %.5f is not reached", h.Schema, worst, errorBound(h.Schema))
		}
	}
}

// digits: 9 significant digits are off by at most half a unit of the 9th, relative.
const digits = 5e-9

func errorBound(schema int) float64 {
	base := math.Pow(2, math.Pow(2, -float64(schema)))
	return (base - 1) / (base + 1)
}

func logUniform(low time.Duration, ratio float64, n int, seed uint64) []time.Duration {
	draw := rand.New(rand.NewPCG(seed, 28))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(math.Round(float64(low) * math.Pow(ratio, draw.Float64())))
	}
	return out
}

// worstError checks h's min and max against the durations' and every rank's quantile
// against the exact one within h's bound, and returns the largest relative error.
func worstError(t *testing.T, h Histogram, durations []time.Duration) float64 {
	t.Helper()
	sorted := slices.Sorted(slices.Values(durations))
	n := int64(len(sorted))
	off := func(got float64, want time.Duration) float64 {
		return math.Abs(got-want.Seconds()) / want.Seconds()
	}
	if off(h.Min, sorted[0]) > digits || off(h.Max, sorted[n-1]) > digits {
		t.Errorf("schema %d: min %v, max %v; want %v, %v", h.Schema, h.Min, h.Max, sorted[0].Seconds(), sorted[n-1].Seconds())
	}
	limit := errorBound(h.Schema) + digits + 1e-12
	worst := 0.0
	for rank := int64(1); rank <= n; rank++ {
		got := quantileAt(h, rank)
		if e := off(got, sorted[rank-1]); e > worst {
			worst = e
		}
	}
	if worst > limit {
		t.Errorf("schema %d: a quantile %.5f off, over the bound %.5f", h.Schema, worst, limit)
	}
	return worst
}

// quantileAt is the contract's reading of rank r (1..count) from h.
func quantileAt(h Histogram, rank int64) float64 {
	if rank <= h.ZeroCount {
		return 0
	}
	base := math.Pow(2, math.Pow(2, -float64(h.Schema)))
	seen := h.ZeroCount
	for k, n := range h.Counts {
		if seen += n; seen >= rank {
			middle := 2 * math.Pow(base, float64(h.Offset+k)) / (base + 1)
			return min(max(middle, h.Min), h.Max)
		}
	}
	return h.Max
}
