package runner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// An arrival run's schedule (CONTRACT.md, Duration runs): the rate r(t) from --rate and
// --stages (or --duration), its integral Λ, and arrival k at Λ⁻¹(s_k). The Python runner has
// its own copy (cxlab_contract/arrivals.py); both compute workloads/testdata/arrivals.json.

// stage is one of --stages: the rate ramps linearly to target over d.
type stage struct {
	d      time.Duration
	target float64
}

// parseStages reads `D1:R1,D2:R2` (Go durations, decimal rates); the bounds are validate's.
func parseStages(s string) ([]stage, error) {
	var stages []stage
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		d, r, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("stage %q is not DURATION:RATE (for example 30s:100)", part)
		}
		duration, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("stage %q: %q is not a duration", part, d)
		}
		target, err := strconv.ParseFloat(r, 64)
		if err != nil {
			return nil, fmt.Errorf("stage %q: %q is not a rate", part, r)
		}
		stages = append(stages, stage{duration, target})
	}
	return stages, nil
}

// piece is one stage on the time axis (seconds): r(t0 + u) = a + b·u for 0 ≤ u ≤ seconds,
// and Λ(t0) = start.
type piece struct{ t0, seconds, a, b, start float64 }

// end is Λ at the piece's end.
func (p piece) end() float64 { return p.start + p.a*p.seconds + p.b*p.seconds*p.seconds/2 }

// rateProfile is r(t) over a run: piecewise linear, in seconds from the task phase's start.
type rateProfile struct {
	pieces  []piece
	seconds float64 // the run: the duration, or the stages' sum
}

// newRateProfile is rate throughout duration, or without duration the stages ramping from rate.
func newRateProfile(rate float64, stages []stage, duration time.Duration) rateProfile {
	if len(stages) == 0 {
		stages = []stage{{duration, rate}}
	}
	var p rateProfile
	start, previous := 0.0, rate
	for _, s := range stages {
		seconds := s.d.Seconds()
		slope := 0.0 // a 0s stage is a jump: it changes the rate and adds nothing to Λ
		if seconds > 0 {
			slope = (s.target - previous) / seconds
		}
		pc := piece{p.seconds, seconds, previous, slope, start}
		p.pieces = append(p.pieces, pc)
		p.seconds, start, previous = p.seconds+seconds, pc.end(), s.target
	}
	return p
}

// expected is Λ(D), the mean number of arrivals over the run.
func (p rateProfile) expected() float64 {
	if len(p.pieces) == 0 {
		return 0
	}
	return p.pieces[len(p.pieces)-1].end()
}

// rateAt is r(t) for t in seconds; 0 outside the run.
func (p rateProfile) rateAt(t float64) float64 {
	for _, pc := range p.pieces {
		if pc.seconds > 0 && t >= pc.t0 && t <= pc.t0+pc.seconds {
			return pc.a + pc.b*(t-pc.t0)
		}
	}
	return 0
}

// inverse is Λ⁻¹(s) for 0 ≤ s ≤ Λ(D): the first time the integral reaches s.
func (p rateProfile) inverse(s float64) float64 {
	i := 0
	return p.inverseFrom(s, &i)
}

// inverseFrom is inverse searching from piece *i on, and leaves *i at the piece s fell in: a
// schedule's s_k only grow, so it walks the pieces once.
func (p rateProfile) inverseFrom(s float64, i *int) float64 {
	for ; *i < len(p.pieces); *i++ {
		pc := p.pieces[*i]
		// A piece where Λ does not grow (a 0s stage, a rate of 0) holds no arrival.
		if pc.end() < s || pc.end() <= pc.start {
			continue
		}
		x := max(0, s-pc.start)
		if x == 0 {
			return pc.t0 // also where a = 0: the closed form is 0/0 there
		}
		// u = (−a + √(a² + 2bx)) / b, written without the cancellation for small b·x (and
		// so also for b = 0); max(0, …) keeps rounding at a ramp down's end out of the root.
		u := 2 * x / (pc.a + math.Sqrt(max(0, pc.a*pc.a+2*pc.b*x)))
		return pc.t0 + min(u, pc.seconds)
	}
	return p.seconds
}

// scheduleEpsilon keeps a uniform schedule's last point s_k < Λ(D) from appearing through
// rounding in Λ.
const scheduleEpsilon = 1e-9

// schedule is every arrival's offset from the task phase's start: Λ⁻¹(s_k) for every
// s_k < Λ(D), s_k = k (uniform) or the running sum of Exp(1) gaps drawn from seed (poisson).
func (p rateProfile) schedule(process string, seed uint64) []time.Duration {
	total := p.expected()
	var offsets []time.Duration
	piece := 0
	at := func(s float64) time.Duration {
		return time.Duration(math.Round(p.inverseFrom(s, &piece) * float64(time.Second)))
	}
	if process == "uniform" {
		offsets = make([]time.Duration, 0, int(math.Ceil(total-scheduleEpsilon)))
		for k := 0; float64(k) < total-scheduleEpsilon; k++ {
			offsets = append(offsets, at(float64(k)))
		}
		return offsets
	}
	offsets = make([]time.Duration, 0, int(total+4*math.Sqrt(total)+16)) // rarely grows
	gaps := rand.New(rand.NewPCG(seed, 0))
	for s := gaps.ExpFloat64(); s < total; s += gaps.ExpFloat64() {
		offsets = append(offsets, at(s))
	}
	return offsets
}
