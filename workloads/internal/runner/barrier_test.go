package runner

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(port int, path string) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A runner at the barrier is ready (503 before it gets there), starts its tasks when POST
// /start releases it, and says how long it waited and when it began.
func TestTheBarrierHoldsTheTasksUntilTheRelease(t *testing.T) {
	port := freePort(t)
	args := strings.Fields(fmt.Sprintf("--model goroutines --workload sleep --tasks 5 --rtt 1ms "+
		"--metrics-port %d --barrier-timeout 10s --pod 2", port))
	var stdout, stderr bytes.Buffer
	status := make(chan int, 1)
	go func() { status <- Main(args, &stdout, &stderr) }()
	deadline := time.Now().Add(5 * time.Second)
	for get(port, "/ready") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // it waits: nothing may start
	select {
	case s := <-status:
		t.Fatalf("ran without a release: exit %d", s)
	default:
	}
	released := time.Now()
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/start", port), "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /start: %v %v", resp, err)
	}
	resp.Body.Close()
	if s := <-status; s != ExitOK {
		t.Fatalf("exit %d: %s", s, stderr.String())
	}
	r := decode(t, stdout.Bytes())
	if r.BarrierWaitSeconds == nil || *r.BarrierWaitSeconds < 0.2 {
		t.Errorf("barrierWaitSeconds %v, want at least the 0.2 s it waited", r.BarrierWaitSeconds)
	}
	if started := r.StartedAtUnixSeconds; started < float64(released.UnixNano())/1e9-0.001 {
		t.Errorf("began at %f, before the release at %f", started, float64(released.UnixNano())/1e9)
	}
	if r.PodIndex == nil || *r.PodIndex != 2 || r.Pods != 1 || r.StartSkewSeconds != nil {
		t.Errorf("pods %d, podIndex %v, startSkew %v", r.Pods, r.PodIndex, r.StartSkewSeconds)
	}
}

func TestARunnerNeverReleasedExits3WithoutAResult(t *testing.T) {
	port := freePort(t)
	args := strings.Fields(fmt.Sprintf("--model goroutines --workload sleep --tasks 5 --rtt 1ms "+
		"--metrics-port %d --barrier-timeout 300ms", port))
	var stdout, stderr bytes.Buffer
	if s := Main(args, &stdout, &stderr); s != ExitNotReleased {
		t.Fatalf("exit %d, want %d: %s", s, ExitNotReleased, stderr.String())
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "not released from the start barrier within 300ms") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestWithoutABarrierTheTasksStartAtOnce(t *testing.T) {
	r, _ := trial(t, strings.Fields("--model goroutines --workload sleep --tasks 3 --rtt 1ms")...)
	if r.BarrierWaitSeconds != nil || r.StartedAtUnixSeconds < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("barrierWait %v, startedAt %f", r.BarrierWaitSeconds, r.StartedAtUnixSeconds)
	}
	if r.LatencyHistogram.Schema != initialSchema || len(r.LatencyHistogram.Counts) == 0 {
		t.Errorf("histogram %+v", r.LatencyHistogram)
	}
}

func TestABarrierNeedsTheMetricsPortAndLocustFlagsAreRefused(t *testing.T) {
	for _, extra := range []string{"--barrier-timeout 5s", "--expect-workers 2", "--locust-master h:1"} {
		args := append(strings.Fields("--model goroutines --workload sleep --tasks 1"), strings.Fields(extra)...)
		if _, err := ParseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: accepted", extra)
		}
	}
}
