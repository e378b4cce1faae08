package runner

import (
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
