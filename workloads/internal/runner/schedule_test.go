package runner

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Λ(D) just above an integer through rounding (0.07/s × 100s = 7.000000000000001, a ramp from
// 0 to 0.4/s over 75s = 15.000000000000004) schedules that many arrivals, not one more.
func TestTheUniformScheduleIgnoresRoundingInLambda(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		stages string
		want   int
	}{{0.07, "100s:0.07", 7}, {0, "75s:0.4", 15}, {0.28, "25s:0.28", 7}, {3.5, "2s:3.5", 7}, {2.5, "1s:2.5", 3}} {
		stages, err := parseStages(c.stages)
		if err != nil {
			t.Fatal(err)
		}
		p := newRateProfile(c.rate, stages, 0)
		if got := len(p.schedule("uniform", 1)); got != c.want {
			t.Errorf("%v/s, %s (Λ = %v): %d arrivals, want %d", c.rate, c.stages, p.expected(), got, c.want)
		}
	}
}

// lambdaAt is Λ(t), the profile's integral, for the tests: the runner needs only its inverse.
func lambdaAt(p rateProfile, t float64) float64 {
	for _, pc := range p.pieces {
		if t <= pc.t0+pc.seconds {
			u := max(0, t-pc.t0)
			return pc.start + pc.a*u + pc.b*u*u/2
		}
	}
	return p.expected()
}

// A ramp from 50/s up to 2000/s and back down to 500/s: Poisson gaps mapped through Λ must be
// Exp(1) wherever the rate stands.
func poissonProfile(t *testing.T) rateProfile {
	stages, err := parseStages("20s:2000,0s:1000,30s:500")
	if err != nil {
		t.Fatal(err)
	}
	return newRateProfile(50, stages, 0)
}

// The gaps Λ(t_k+1) − Λ(t_k) of a Poisson schedule are Exp(1): the Kolmogorov–Smirnov
// statistic of about 43,000 of them stays under its 1 % critical value, 1.628/√n.
func TestPoissonGapsAreExponential(t *testing.T) {
	p := poissonProfile(t)
	offsets := p.schedule("poisson", 1)
	gaps := make([]float64, len(offsets))
	previous := 0.0
	for k, d := range offsets {
		s := lambdaAt(p, d.Seconds())
		gaps[k], previous = s-previous, s
	}
	slices.Sort(gaps)
	n := float64(len(gaps))
	ks := 0.0
	for i, g := range gaps {
		f := 1 - math.Exp(-g)
		ks = max(ks, math.Abs(float64(i+1)/n-f), math.Abs(f-float64(i)/n))
	}
	if critical := 1.628 / math.Sqrt(n); ks > critical || n < 40_000 {
		t.Errorf("KS statistic %.5f over %d gaps, critical %.5f: the gaps are not Exp(1)", ks, len(gaps), critical)
	}
}

// Over many seeds the count of a Poisson schedule averages Λ(D); every offset is in [0, D).
func TestPoissonCountsAverageLambda(t *testing.T) {
	stages, err := parseStages("2s:100")
	if err != nil {
		t.Fatal(err)
	}
	p := newRateProfile(0, stages, 0) // Λ(2s) = 100
	const draws = 400
	total := 0
	for seed := range uint64(draws) {
		offsets := p.schedule("poisson", seed)
		total += len(offsets)
		if len(offsets) > 0 && (offsets[0] < 0 || offsets[len(offsets)-1] >= 2*time.Second || !slices.IsSorted(offsets)) {
			t.Fatalf("seed %d: offsets out of [0, 2s) or out of order", seed)
		}
	}
	// The mean of 400 Poisson(100) counts: standard error 0.5; 4 of them is far out.
	if mean := float64(total) / draws; math.Abs(mean-100) > 2 {
		t.Errorf("mean count %v over %d seeds, want Λ(D) = 100", mean, draws)
	}
}

func TestTheSameSeedDrawsTheSameSchedule(t *testing.T) {
	p := newRateProfile(100, nil, 5*time.Second)
	a, b, other := p.schedule("poisson", 42), p.schedule("poisson", 42), p.schedule("poisson", 43)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 drew two schedules")
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 42 and 43 drew the same schedule")
	}
}

// r(t) for cxlab_arrival_rate: the ramps, 0 outside the run.
func TestRateAt(t *testing.T) {
	p := poissonProfile(t)
	for at, want := range map[float64]float64{-1: 0, 0: 50, 10: 1025, 20: 2000, 35: 750, 50: 500, 51: 0} {
		if got := p.rateAt(at); math.Abs(got-want) > 1e-9 {
			t.Errorf("r(%v) = %v, want %v", at, got, want)
		}
	}
}

// Where the rate is 0, Λ does not grow and no arrival is scheduled: the first one comes where
// the rate rises again, not at the start of the pause.
func TestNoArrivalWhereTheRateIsZero(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		stages string
		want   []time.Duration
	}{
		{0, "1s:0,0s:4,1s:4", []time.Duration{ms(1000), ms(1250), ms(1500), ms(1750)}},
		{0, "1s:0,1s:2", []time.Duration{ms(1000)}}, // Λ = (t-1)² over the ramp
		// Down to 0 (Λ(2s) = 3 is first reached at 2s), a pause, a jump back up to 2/s.
		{2, "1s:2,1s:0,1s:0,0s:2,1s:2", []time.Duration{0, ms(500), ms(1000), ms(2000), ms(3500)}},
	} {
		stages, err := parseStages(c.stages)
		if err != nil {
			t.Fatal(err)
		}
		if got := newRateProfile(c.rate, stages, 0).schedule("uniform", 1); !slices.Equal(got, c.want) {
			t.Errorf("%s from %v/s: %v, want %v", c.stages, c.rate, got, c.want)
		}
	}
}
