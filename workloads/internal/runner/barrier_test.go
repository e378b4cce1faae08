package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
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

// waitReady polls GET /ready until the runner on port waits at its barrier.
func waitReady(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for get(port, "/ready") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call sends method to url and returns the status and body.
func call(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The barrier's endpoints: /ready answers 503 until the runner waits and 200 from then on,
// also once it left; POST /start releases it, as often as it is called; /start takes only POST.
func TestTheBarriersEndpoints(t *testing.T) {
	b := newStartBarrier(10 * time.Second)
	mux := http.NewServeMux()
	b.handle(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if status, _ := call(t, http.MethodGet, srv.URL+"/ready"); status != http.StatusServiceUnavailable {
		t.Fatalf("GET /ready before the barrier: %d, want 503", status)
	}
	type waited struct {
		seconds *float64
		err     error
	}
	left := make(chan waited, 1)
	go func() {
		s, err := b.wait()
		left <- waited{s, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, body := call(t, http.MethodGet, srv.URL+"/ready")
		if status == http.StatusOK && strings.TrimSpace(body) == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /ready at the barrier: %d %q", status, body)
		}
		time.Sleep(time.Millisecond)
	}
	if status, _ := call(t, http.MethodGet, srv.URL+"/start"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /start: %d, want 405", status)
	}
	select {
	case w := <-left:
		t.Fatalf("left the barrier unreleased: %v %v", w.seconds, w.err)
	case <-time.After(50 * time.Millisecond):
	}
	for range 2 {
		if status, body := call(t, http.MethodPost, srv.URL+"/start"); status != http.StatusOK || strings.TrimSpace(body) != "released" {
			t.Errorf("POST /start: %d %q", status, body)
		}
	}
	w := <-left
	if w.err != nil || w.seconds == nil || *w.seconds < 0.05 {
		t.Errorf("wait() = %v, %v; want the 50 ms and more it waited", w.seconds, w.err)
	}
	if status, _ := call(t, http.MethodGet, srv.URL+"/ready"); status != http.StatusOK {
		t.Errorf("GET /ready after the barrier: %d, want 200", status)
	}
}

// A release that comes before the runner reaches its barrier is remembered.
func TestAStartBeforeTheBarrierLetsTheRunnerThrough(t *testing.T) {
	b := newStartBarrier(10 * time.Second)
	b.release()
	began := time.Now()
	waited, err := b.wait()
	if err != nil || waited == nil || time.Since(began) > time.Second {
		t.Errorf("wait() = %v, %v after %v", waited, err, time.Since(began))
	}
}

// A runner at the barrier is ready, starts nothing until POST /start releases it, and says
// how long it waited and when it began.
func TestTheBarrierHoldsTheTasksUntilTheRelease(t *testing.T) {
	port := freePort(t)
	args := strings.Fields(fmt.Sprintf("--model goroutines --workload sleep --tasks 5 --rtt 1ms "+
		"--metrics-port %d --barrier-timeout 10s --pod 2", port))
	var stdout, stderr bytes.Buffer
	status := make(chan int, 1)
	go func() { status <- Main(args, &stdout, &stderr) }()
	waitReady(t, port)
	time.Sleep(200 * time.Millisecond) // it waits: nothing may start
	select {
	case s := <-status:
		t.Fatalf("ran without a release: exit %d", s)
	default:
	}
	scraped := waitForMetrics(t, port, `cxlab_tasks_in_flight 0`)
	for _, want := range []string{`pod_index="2"`, "\ncxlab_trial_elapsed_seconds 0\n", `cxlab_tasks_completed_total{outcome="ok"} 0`} {
		if !strings.Contains(scraped, want) {
			t.Errorf("metrics at the barrier lack %q", want)
		}
	}
	released := time.Now()
	if s, body := call(t, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/start", port)); s != http.StatusOK {
		t.Fatalf("POST /start: %d %q", s, body)
	}
	if s := <-status; s != ExitOK {
		t.Fatalf("exit %d: %s", s, stderr.String())
	}
	r := decode(t, stdout.Bytes())
	if r.BarrierWaitSeconds == nil || *r.BarrierWaitSeconds < 0.2 {
		t.Errorf("barrierWaitSeconds %v, want at least the 0.2 s it waited", r.BarrierWaitSeconds)
	}
	// startedAt is rounded to the microsecond: half of one is the only slack.
	if started, at := r.StartedAtUnixSeconds, float64(released.UnixNano())/1e9; started < at-0.5e-6 {
		t.Errorf("began at %f, before the release at %f", started, at)
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
	began := time.Now()
	if s := Main(args, &stdout, &stderr); s != ExitNotReleased {
		t.Fatalf("exit %d, want %d: %s", s, ExitNotReleased, stderr.String())
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("gave up after %v, before the 300ms", waited)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "cxlab-runner-go: not released from the start barrier within 300ms\n") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// A Pod deleted while its runner waits at the barrier stops as one deleted during its tasks.
func TestSIGTERMAtTheBarrierStopsTheRunner(t *testing.T) {
	port := freePort(t)
	cmd, stdout, stderr := startRunner(t, fmt.Sprintf("--model goroutines --workload sleep --tasks 5 --rtt 1ms "+
		"--metrics-port %d --barrier-timeout 10s", port))
	waitReady(t, port)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %v, want 143: %s", err, stderr.String())
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "cxlab-runner-go: stopped by SIGTERM\n") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestWithoutABarrierTheTasksStartAtOnce(t *testing.T) {
	before := time.Now()
	r, _ := trial(t, strings.Fields("--model goroutines --workload sleep --tasks 3 --rtt 1ms")...)
	if r.BarrierWaitSeconds != nil || r.StartedAtUnixSeconds < float64(before.UnixNano())/1e9-0.5e-6 {
		t.Errorf("barrierWait %v, startedAt %f, before the run at %f", r.BarrierWaitSeconds, r.StartedAtUnixSeconds, float64(before.UnixNano())/1e9)
	}
	if r.PodIndex == nil || *r.PodIndex != 0 || r.Pods != 1 {
		t.Errorf("pods %d, podIndex %v", r.Pods, r.PodIndex)
	}
	// The initial schema, or a coarser one when a loaded machine spread the 1 ms sleeps wider
	// than its buckets span (1.2 to 14.5 ms once: schema 4)
	if h := r.LatencyHistogram; h.Schema > initialSchema || len(h.Counts) == 0 || len(h.Counts) > maxBuckets {
		t.Errorf("histogram %+v", h)
	}
}

// The barrier is released over HTTP, so it needs the metrics endpoint: without, a usage error.
func TestABarrierNeedsTheMetricsPort(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := strings.Fields("--model goroutines --workload sleep --tasks 1 --barrier-timeout 5s")
	if s := Main(args, &stdout, &stderr); s != ExitUsage {
		t.Fatalf("exit %d, want %d", s, ExitUsage)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "cxlab-runner-go: --barrier-timeout needs --metrics-port") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestLocustFlagsAreRefused(t *testing.T) {
	for _, extra := range []string{"--expect-workers 2", "--locust-master h:1"} {
		args := append(strings.Fields("--model goroutines --workload sleep --tasks 1"), strings.Fields(extra)...)
		var usage *UsageError
		if _, err := ParseFlags(args, io.Discard); !errors.As(err, &usage) {
			t.Errorf("%s: %v, want a usage error", extra, err)
		}
	}
}
