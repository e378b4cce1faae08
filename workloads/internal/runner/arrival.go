package runner

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// minIssuedShare: a generator that issued fewer of the arrivals scheduled within the duration
// by its end is saturated (runner-contract.json saturation.minIssuedShare).
const minIssuedShare = 0.99

// maxSaturationRunes is the schema's bound on the Result's saturation.
const maxSaturationRunes = 200

// Arrival is the Result's arrival: an arrival run's schedule, generator and queue.
type Arrival struct {
	Process               string    `json:"process"`
	OnBusy                string    `json:"onBusy"`
	RatePerSecond         float64   `json:"ratePerSecond"`
	AchievedRatePerSecond float64   `json:"achievedRatePerSecond"`
	Arrivals              int       `json:"arrivals"`
	Dropped               int       `json:"dropped"`
	MaxQueue              int64     `json:"maxQueue"`
	LagSeconds            Lag       `json:"lagSeconds"`
	MaxLagSeconds         float64   `json:"maxLagSeconds"`
	GeneratorSaturated    bool      `json:"generatorSaturated"`
	Saturation            *string   `json:"saturation"` // why, with the figures; null when not
	WaitHistogram         Histogram `json:"waitHistogram"`
	ServiceHistogram      Histogram `json:"serviceHistogram"`
}

// Lag is the Result's lagSeconds: how late the generator issued arrivals.
type Lag struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// setArrival fills the Result's arrival from an arrival run (after setDurationRun).
func (r *Result) setArrival(c *Config, a *arrivalRun, run time.Duration) {
	t := &a.times
	dropped := 0
	for _, o := range t.outcome {
		if o == notRun {
			dropped++
		}
	}
	v := judgeGenerator(t, run, c.MaxLag, c.Warmup)
	r.Arrival = &Arrival{
		Process:               c.Arrival,
		OnBusy:                c.OnBusy,
		RatePerSecond:         v.rate,
		AchievedRatePerSecond: v.achieved,
		Arrivals:              len(t.scheduled),
		Dropped:               dropped,
		MaxQueue:              a.maxQueue,
		LagSeconds:            v.lag,
		MaxLagSeconds:         round6(c.MaxLag.Seconds()),
		GeneratorSaturated:    v.saturation != nil,
		Saturation:            v.saturation,
		WaitHistogram:         buildHistogram(afterWarmup(t, c.Warmup, wait)),
		ServiceHistogram:      buildHistogram(afterWarmup(t, c.Warmup, service)),
	}
}

// verdict is how well the generator kept the schedule.
type verdict struct {
	rate, achieved float64 // arrivals scheduled within the run and issued by its end, per second
	lag            Lag
	saturation     *string // why it is saturated; nil when it is not
}

// judgeGenerator: the generator is saturated when its lag p99 (after the warm-up, dropped
// arrivals included) is over maxLag, or it issued fewer than minIssuedShare of the arrivals
// scheduled within the run by the run's end.
func judgeGenerator(t *taskTimes, run, maxLag, warmup time.Duration) verdict {
	scheduled, issued := 0, 0
	var lags []time.Duration
	for k, s := range t.scheduled {
		if s < run {
			scheduled++
		}
		if t.issued[k] <= run {
			issued++
		}
		if s >= warmup {
			lags = append(lags, max(0, t.issued[k]-s))
		}
	}
	slices.Sort(lags)
	v := verdict{rate: round6(float64(scheduled) / run.Seconds()), achieved: round6(float64(issued) / run.Seconds())}
	var p99 time.Duration
	if len(lags) > 0 {
		p99 = nearestRank(lags, 990)
		v.lag = Lag{P50: significant(nearestRank(lags, 500).Seconds()), P99: significant(p99.Seconds()),
			Max: significant(lags[len(lags)-1].Seconds())}
	}
	var reasons []string
	if p99 > maxLag {
		reasons = append(reasons, fmt.Sprintf("lag p99 %.3g ms over the bound %.3g ms", millis(p99), millis(maxLag)))
	}
	if float64(issued) < minIssuedShare*float64(scheduled) {
		reasons = append(reasons, fmt.Sprintf("issued %.6g/s of %.6g/s by the duration's end", v.achieved, v.rate))
	}
	if len(reasons) > 0 {
		why := truncate(strings.Join(reasons, "; "), maxSaturationRunes)
		v.saturation = &why
	}
	return v
}

func millis(d time.Duration) float64 { return d.Seconds() * 1e3 }
