package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runInBackground runs Main with args, its exit status on the channel.
func runInBackground(args string) (chan int, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() { exit <- Main(strings.Fields(args), &stdout, &stderr) }()
	return exit, &stderr
}

func waitFor(t *testing.T, port int, path string, status int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for get(port, path) != status {
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never answered %d", path, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With --final-read the runner answers GET /done 503 while its tasks run and 200 once the
// Result is written, then waits for GET /metrics?final=1: a read without final=1 does not end
// the wait, the final one does, answered whole (with cxlab_trial_finished 1).
func TestTheRunnerWaitsForItsFinalRead(t *testing.T) {
	port := freePort(t)
	exit, stderr := runInBackground(fmt.Sprintf("--model goroutines --workload sleep --tasks 2 "+
		"--workers 1 --rtt 300ms --metrics-port %d --final-read 20s", port))
	waitFor(t, port, "/metrics", http.StatusOK)
	if status := get(port, "/done"); status != http.StatusServiceUnavailable {
		t.Errorf("GET /done while the tasks run: %d, want 503", status)
	}
	// A final read before the end is not the final one: its values can still move.
	if status, _ := call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics?final=1", port)); status != http.StatusOK {
		t.Fatalf("GET /metrics?final=1 while running: %d", status)
	}
	waitFor(t, port, "/done", http.StatusOK)
	if status := get(port, "/metrics"); status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	select {
	case s := <-exit:
		t.Fatalf("exited %d before its final read: %s", s, stderr)
	case <-time.After(300 * time.Millisecond):
	}
	status, body := call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics?final=1", port))
	if status != http.StatusOK || !strings.Contains(body, "\ncxlab_trial_finished 1\n") ||
		!strings.Contains(body, `cxlab_tasks_completed_total{outcome="ok"} 2`) {
		t.Fatalf("final read: %d %q", status, body)
	}
	select {
	case s := <-exit:
		if s != ExitOK || strings.Contains(stderr.String(), "no final read") {
			t.Errorf("exit %d: %s", s, stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5 s after its final read")
	}
}

// GET /result answers 503 while the tasks run and, once the Result is written, the Result
// itself as JSON: the very bytes written to stdout and --result-path. It ends nothing: the
// runner with --final-read still waits for GET /metrics?final=1.
func TestResultAnswersTheWrittenResultAndIsNotTheFinalRead(t *testing.T) {
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "result.json")
	var stdout, stderr bytes.Buffer
	exit := make(chan int, 1)
	args := fmt.Sprintf("--model goroutines --workload sleep --tasks 2 --workers 1 --rtt 300ms "+
		"--metrics-port %d --final-read 20s --result-path %s", port, path)
	go func() { exit <- Main(strings.Fields(args), &stdout, &stderr) }()
	url := fmt.Sprintf("http://127.0.0.1:%d/result", port)
	waitFor(t, port, "/metrics", http.StatusOK)
	if status, body := call(t, http.MethodGet, url); status != http.StatusServiceUnavailable || body != "running\n" {
		t.Errorf("GET /result while the tasks run: %d %q, want 503 running", status, body)
	}
	waitFor(t, port, "/result", http.StatusOK)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /result: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var result Result
	if err := json.Unmarshal(body, &result); err != nil || result.TasksOK != 2 {
		t.Errorf("GET /result: %v %q", err, body)
	}
	if written, err := os.ReadFile(path); err != nil || !bytes.Equal(body, written) {
		t.Errorf("GET /result %q, --result-path %q (%v)", body, written, err)
	}
	select {
	case s := <-exit:
		t.Fatalf("exited %d after GET /result, before its final read: %s", s, stderr.String())
	case <-time.After(300 * time.Millisecond):
	}
	if status, _ := call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics?final=1", port)); status != http.StatusOK {
		t.Fatalf("final read: %d", status)
	}
	select {
	case s := <-exit:
		if s != ExitOK || strings.Contains(stderr.String(), "no final read") {
			t.Errorf("exit %d: %s", s, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5 s after its final read")
	}
	if !bytes.Equal(body, stdout.Bytes()) {
		t.Errorf("GET /result %q, stdout %q", body, stdout.Bytes())
	}
}

// Nobody reads: the runner exits after --final-read, saying so, with its Result written.
func TestAFinalReadThatNeverComesEndsTheWaitAfterItsBound(t *testing.T) {
	port := freePort(t)
	began := time.Now()
	exit, stderr := runInBackground(fmt.Sprintf("--model goroutines --workload sleep --tasks 1 "+
		"--metrics-port %d --final-read 400ms", port))
	select {
	case s := <-exit:
		if s != ExitOK || !strings.Contains(stderr.String(), "no final read of /metrics within 400ms") {
			t.Errorf("exit %d: %s", s, stderr)
		}
		if took := time.Since(began); took < 400*time.Millisecond {
			t.Errorf("exited after %v, before the 400ms", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after a 400ms bound")
	}
}

// The final read does not cut the linger short: the runner stays for whichever ends later.
func TestTheLingerOutlastsAnEarlyFinalRead(t *testing.T) {
	port := freePort(t)
	exit, stderr := runInBackground(fmt.Sprintf("--model goroutines --workload sleep --tasks 1 "+
		"--metrics-port %d --final-read 10s --linger 700ms", port))
	waitFor(t, port, "/done", http.StatusOK)
	read := time.Now()
	if status, _ := call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics?final=1", port)); status != http.StatusOK {
		t.Fatalf("final read: %d", status)
	}
	select {
	case s := <-exit:
		if s != ExitOK {
			t.Errorf("exit %d: %s", s, stderr)
		}
		if time.Since(read) < 300*time.Millisecond {
			t.Errorf("exited %v after the final read, inside its 700ms linger", time.Since(read))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s later")
	}
}

func TestAFinalReadNeedsTheMetricsPort(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := strings.Fields("--model goroutines --workload sleep --tasks 1 --final-read 5s")
	if s := Main(args, &stdout, &stderr); s != ExitUsage || !strings.Contains(stderr.String(), "--final-read needs --metrics-port") {
		t.Errorf("exit %d: %s", s, stderr.String())
	}
}

// GET /done?wait=S is a long poll: asked while the tasks run, it answers 200 once the Result
// is written rather than 503 at once; a wait that ends first answers 503, not before S.
func TestDoneWaitsForTheEndWhenAsked(t *testing.T) {
	port := freePort(t)
	exit, stderr := runInBackground(fmt.Sprintf("--model goroutines --workload sleep --tasks 2 "+
		"--workers 1 --rtt 400ms --metrics-port %d --final-read 20s", port))
	waitFor(t, port, "/metrics", http.StatusOK)
	began := time.Now()
	if status := get(port, "/done?wait=0.1"); status != http.StatusServiceUnavailable {
		t.Fatalf("GET /done?wait=0.1 while the tasks run: %d, want 503", status)
	}
	if waited := time.Since(began); waited < 100*time.Millisecond {
		t.Errorf("GET /done?wait=0.1 answered after %v, before its wait", waited)
	}
	if status := get(port, "/done?wait=30"); status != http.StatusOK {
		t.Fatalf("GET /done?wait=30: %d, want 200 once the tasks ended: %s", status, stderr)
	}
	if status, body := call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/result", port)); status != http.StatusOK || !strings.Contains(body, `"tasksOk":2`) {
		t.Fatalf("GET /result after the long poll: %d %s", status, body)
	}
	call(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics?final=1", port))
	if s := <-exit; s != 0 {
		t.Fatalf("exit %d: %s", s, stderr)
	}
}
