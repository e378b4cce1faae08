package measure

import "time"

// Timeline holds values sampled every Interval from t=0, at most max of
// them. When full it drops every other sample and doubles Interval, so it
// always spans the whole run with uniformly spaced samples however long the
// run lasts.
type Timeline struct {
	Interval time.Duration
	Samples  []int64
	max      int
}

// NewTimeline returns an empty timeline; max must be at least 2.
func NewTimeline(interval time.Duration, max int) *Timeline {
	if interval <= 0 || max < 2 {
		panic("measure: timeline needs a positive interval and room for 2 samples")
	}
	return &Timeline{Interval: interval, Samples: make([]int64, 0, max), max: max}
}

// Next is the offset from t=0 at which the next sample is due.
func (t *Timeline) Next() time.Duration {
	return time.Duration(len(t.Samples)) * t.Interval
}

// Add records v, read at offset elapsed, in every slot elapsed has reached.
// A sampler that woke late repeats its value rather than leaving a gap, which
// keeps the spacing uniform.
func (t *Timeline) Add(elapsed time.Duration, v int64) {
	for elapsed >= t.Next() {
		if len(t.Samples) == t.max {
			t.compact()
			continue
		}
		t.Samples = append(t.Samples, v)
	}
}

// AddFinal records the value read when the run ended, in the next slot if
// the end is nearer to that slot than to the last one.
func (t *Timeline) AddFinal(elapsed time.Duration, v int64) {
	t.Add(elapsed+t.Interval/2, v)
}

// compact keeps the samples at even slots and doubles the interval.
func (t *Timeline) compact() {
	n := 0
	for i := 0; i < len(t.Samples); i += 2 {
		t.Samples[n] = t.Samples[i]
		n++
	}
	t.Samples = t.Samples[:n]
	t.Interval *= 2
}
