package measure

import (
	"testing"
	"time"
)

const tick = 50 * time.Millisecond

func TestTimelineKeepsEverySampleUntilFull(t *testing.T) {
	tl := NewTimeline(tick, 64)
	for i := range 64 {
		tl.Add(time.Duration(i)*tick, int64(i))
	}
	if len(tl.Samples) != 64 || tl.Interval != tick {
		t.Fatalf("got %d samples every %v, want 64 every %v", len(tl.Samples), tl.Interval, tick)
	}
	for i, v := range tl.Samples {
		if v != int64(i) {
			t.Fatalf("sample %d = %d", i, v)
		}
	}
}

func TestTimelineHalvesWhenFull(t *testing.T) {
	tl := NewTimeline(tick, 64)
	for i := range 65 { // one more than fits
		tl.Add(time.Duration(i)*tick, int64(i))
	}
	if tl.Interval != 2*tick {
		t.Fatalf("interval %v, want %v", tl.Interval, 2*tick)
	}
	// Slots 0, 2, ..., 62 survive, then slot 64 is sample 32 at 2*tick spacing.
	if len(tl.Samples) != 33 {
		t.Fatalf("got %d samples, want 33", len(tl.Samples))
	}
	for i, v := range tl.Samples {
		if v != int64(2*i) {
			t.Fatalf("sample %d = %d, want %d", i, v, 2*i)
		}
	}
}

// Every sample must sit at slot*Interval, however long the run.
func TestTimelineStaysUniformOverLongRuns(t *testing.T) {
	tl := NewTimeline(tick, 64)
	const ticks = 10_000 // 500s at 50ms
	for i := range ticks {
		if at := time.Duration(i) * tick; at >= tl.Next() {
			tl.Add(at, int64(at)) // the value is its own timestamp
		}
	}
	if len(tl.Samples) > 64 || len(tl.Samples) < 32 {
		t.Fatalf("got %d samples, want 32..64", len(tl.Samples))
	}
	for i, v := range tl.Samples {
		if want := int64(time.Duration(i) * tl.Interval); v != want {
			t.Fatalf("sample %d taken at %v, want %v", i, time.Duration(v), time.Duration(want))
		}
	}
	if covered := time.Duration(len(tl.Samples)) * tl.Interval; covered < (ticks-1)*tick {
		t.Fatalf("timeline covers %v of %v", covered, (ticks-1)*tick)
	}
}

func TestTimelineFillsSlotsALateSamplerMissed(t *testing.T) {
	tl := NewTimeline(tick, 64)
	tl.Add(0, 1)
	tl.Add(3*tick+tick/10, 7) // woke late: slots 1, 2 and 3 are all due
	if want := []int64{1, 7, 7, 7}; !equal(tl.Samples, want) {
		t.Fatalf("got %v, want %v", tl.Samples, want)
	}
}

func TestTimelineFinalSample(t *testing.T) {
	tl := NewTimeline(tick, 64)
	tl.Add(0, 1)
	tl.AddFinal(tick/4, 2) // nearer slot 0 than slot 1: dropped
	if len(tl.Samples) != 1 {
		t.Fatalf("early final sample kept: %v", tl.Samples)
	}
	tl.AddFinal(tick*3/4, 3) // nearer slot 1: kept
	if want := []int64{1, 3}; !equal(tl.Samples, want) {
		t.Fatalf("got %v, want %v", tl.Samples, want)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
