// Command bare-goroutines is the baseline for the runner's overhead: one
// goroutine per task sleeping rtt, nothing measured but wall time and peak
// RSS.
package main

import (
	"encoding/json"
	"flag"
	"os"
	"sync"
	"time"

	"cxlab.dev/workloads/internal/measure"
)

func main() {
	tasks := flag.Int("tasks", 10000, "goroutines to start")
	rtt := flag.Duration("rtt", 100*time.Millisecond, "how long each sleeps")
	flag.Parse()
	n, d := *tasks, *rtt

	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(n)
	for range n {
		go func() {
			time.Sleep(d)
			wg.Done()
		}()
	}
	wg.Wait()
	wall := time.Since(start)

	// Peak RSS measured as the runners measure it (VmHWM, reset at exec).
	_ = json.NewEncoder(os.Stdout).Encode(struct {
		WallSeconds  float64 `json:"wallSeconds"`
		PeakRSSBytes int64   `json:"peakRssBytes"`
	}{wall.Seconds(), measure.PeakRSS()})
}
