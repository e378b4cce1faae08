package measure

import (
	"sync"
	"time"
)

// Timeline shape used by the runners: 50ms to start with, at most 64 samples.
const (
	TimelineInterval = 50 * time.Millisecond
	TimelineSamples  = 64
)

// Sampler reads resident memory and the thread count on the timeline's
// schedule, in its own goroutine, from a start time until Stop.
type Sampler struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu          sync.Mutex
	timeline    *Timeline
	peakRSS     int64
	peakThreads int64
}

// Summary is what a Sampler saw.
type Summary struct {
	Timeline    *Timeline
	PeakRSS     int64
	PeakThreads int64
}

// StartSampler starts sampling; baselineRSS is the reading taken at start
// and becomes the first sample.
func StartSampler(start time.Time, baselineRSS int64, interval time.Duration, max int) *Sampler {
	s := &Sampler{
		start:    start,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		timeline: NewTimeline(interval, max),
		peakRSS:  baselineRSS,
	}
	s.timeline.Add(0, baselineRSS)
	s.readThreads()
	go s.loop()
	return s
}

func (s *Sampler) loop() {
	defer close(s.done)
	timer := time.NewTimer(s.untilNext())
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-timer.C:
			s.sample(false)
			timer.Reset(s.untilNext())
		}
	}
}

func (s *Sampler) untilNext() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Until(s.start.Add(s.timeline.Next()))
}

func (s *Sampler) sample(final bool) {
	rss, err := RSS()
	elapsed := time.Since(s.start)
	s.readThreads()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peakRSS = max(s.peakRSS, rss)
	if final {
		s.timeline.AddFinal(elapsed, rss)
	} else {
		s.timeline.Add(elapsed, rss)
	}
}

func (s *Sampler) readThreads() {
	n, err := Threads()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.peakThreads = max(s.peakThreads, n)
	s.mu.Unlock()
}

// Stop ends sampling, takes a last reading and returns the summary.
func (s *Sampler) Stop() Summary {
	close(s.stop)
	<-s.done
	s.sample(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	return Summary{Timeline: s.timeline, PeakRSS: s.peakRSS, PeakThreads: s.peakThreads}
}
