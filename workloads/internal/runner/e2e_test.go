package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"cxlab.dev/workloads/internal/delay"
)

// runnerArgsEnv makes this test binary cxlab-runner-go itself (TestMain): a test that sends a
// signal or needs the real exit status runs the runner as a process of its own.
const runnerArgsEnv = "CXLAB_TEST_RUNNER_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(runnerArgsEnv); ok {
		os.Exit(Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startRunner starts the runner as a child process with args; Wait reports its exit.
func startRunner(t *testing.T, args string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runnerArgsEnv+"="+args)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, stdout, stderr
}

// trial runs Main in-process and returns the decoded Result and its bytes.
func trial(t *testing.T, args ...string) (Result, []byte) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if status := Main(args, &stdout, &stderr); status != ExitOK {
		t.Fatalf("exit %d\n%s", status, stderr.String())
	}
	return decode(t, stdout.Bytes()), stdout.Bytes()
}

func decode(t *testing.T, b []byte) Result {
	t.Helper()
	if len(b) > MaxResultBytes || bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
		t.Fatalf("Result is not one line under %d bytes: %d bytes", MaxResultBytes, len(b))
	}
	validateResult(t, b)
	var r Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestSleepTrialEndToEnd(t *testing.T) {
	port := freePort(t)
	resultPath := filepath.Join(t.TempDir(), "result.json")
	args := strings.Fields(fmt.Sprintf("--model goroutines --workload sleep --tasks 50 --workers 10 --rtt 20ms "+
		"--metrics-port %d --linger 1s --result-path %s --experiment e2e --trial t1", port, resultPath))

	var stdout, stderr bytes.Buffer
	status := make(chan int, 1)
	go func() { status <- Main(args, &stdout, &stderr) }()

	// While the runner lingers, the endpoint shows the final values.
	scraped := waitForMetrics(t, port, "cxlab_trial_finished 1")
	for _, line := range []string{
		`cxlab_tasks_completed_total{outcome="ok"} 50`,
		`cxlab_tasks_completed_total{outcome="failed"} 0`,
		`cxlab_task_duration_seconds_count 50`,
		`cxlab_tasks_in_flight 0`,
		`cxlab_trial_tasks 50`,
		fmt.Sprintf(`cxlab_trial_info{experiment="e2e",gomaxprocs="%d",model="goroutines",pod_index="0",runtime="%s",trial="t1",workers="10",workload="sleep"} 1`,
			runtime.GOMAXPROCS(0), runtime.Version()),
	} {
		if !strings.Contains(scraped, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if got := <-status; got != ExitOK {
		t.Fatalf("exit %d\n%s", got, stderr.String())
	}

	file, err := os.ReadFile(resultPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, stdout.Bytes()) {
		t.Errorf("--result-path holds different bytes from stdout")
	}
	r := decode(t, stdout.Bytes())
	if r.Schema != Schema || r.Model != "goroutines" || r.Workload != "sleep" || r.Experiment != "e2e" || r.Trial != "t1" {
		t.Errorf("labels: %+v", r)
	}
	if r.TasksOK != 50 || r.TasksFailed != 0 || r.Tasks != 50 || r.Workers != 10 {
		t.Errorf("tasks %d ok %d failed %d workers %d", r.Tasks, r.TasksOK, r.TasksFailed, r.Workers)
	}
	if *r.FloorSeconds != 0.1 || r.WallSeconds < *r.FloorSeconds {
		t.Errorf("wall %v below floor %v", r.WallSeconds, *r.FloorSeconds)
	}
	if *r.Efficiency <= 0 || *r.Efficiency > 1 {
		t.Errorf("efficiency %v", *r.Efficiency)
	}
	if r.LatencySeconds.P50 < 0.02 || r.LatencySeconds.Max < r.LatencySeconds.P99 || r.LatencySeconds.P99 < r.LatencySeconds.P50 {
		t.Errorf("latency %+v", r.LatencySeconds)
	}
	if r.WallSeconds > 10 { // sanity only
		t.Errorf("wall %v for 100ms of sleeping", r.WallSeconds)
	}
	if *r.GOMAXPROCS != runtime.GOMAXPROCS(0) || r.Runtime != runtime.Version() || len(r.CPUs) == 0 {
		t.Errorf("gomaxprocs %d runtime %s cpus %v", *r.GOMAXPROCS, r.Runtime, r.CPUs)
	}
	if len(r.RSSTimeline.RSSBytes) < 2 || r.RSSTimeline.RSSBytes[0] != r.BaselineRSSBytes || r.RSSTimeline.IntervalSeconds != 0.05 {
		t.Errorf("timeline %+v, baseline %d", r.RSSTimeline, r.BaselineRSSBytes)
	}
	if r.PeakRSSBytes < r.BaselineRSSBytes || r.PeakThreads < 1 || r.RTTSeconds == nil || *r.RTTSeconds != 0.02 {
		t.Errorf("peak rss %d baseline %d threads %d rtt %v", r.PeakRSSBytes, r.BaselineRSSBytes, r.PeakThreads, r.RTTSeconds)
	}
	if r.Iterations != nil || r.HoldSeconds != nil || len(r.Errors) != 0 {
		t.Errorf("iterations %v hold %v errors %v", r.Iterations, r.HoldSeconds, r.Errors)
	}
}

func waitForMetrics(t *testing.T, port int, want string) string {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), want+"\n") {
				return string(b)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("metrics never showed %q", want)
	return ""
}

func TestHoldOneGoroutinePerTask(t *testing.T) {
	r, _ := trial(t, strings.Fields("--model goroutines --workload hold --tasks 200 --hold 30ms")...)
	if r.Workers != 200 || r.TasksOK != 200 || *r.HoldSeconds != 0.03 || *r.FloorSeconds != 0.03 {
		t.Errorf("workers %d ok %d hold %v floor %v", r.Workers, r.TasksOK, *r.HoldSeconds, *r.FloorSeconds)
	}
	if r.WallSeconds < 0.03 || r.RTTSeconds != nil {
		t.Errorf("wall %v rtt %v", r.WallSeconds, r.RTTSeconds)
	}
}

func TestCPUTrial(t *testing.T) {
	r, _ := trial(t, strings.Fields("-model goroutines -workload cpu -tasks 4 -workers 2 -iterations 20000000")...)
	if r.TasksOK != 4 || r.Iterations == nil || *r.Iterations != 20_000_000 {
		t.Errorf("ok %d iterations %v", r.TasksOK, r.Iterations)
	}
	if r.FloorSeconds != nil || r.Efficiency != nil || r.RTTSeconds != nil {
		t.Errorf("cpu has a floor: %v %v %v", r.FloorSeconds, r.Efficiency, r.RTTSeconds)
	}
	if r.CPUUserSeconds+r.CPUSystemSeconds <= 0 || r.CPUPercent <= 0 {
		t.Errorf("80M iterations used no CPU: %+v", r)
	}
}

// delayTarget is cxlab-delay's handler on a test server, counting connections.
func delayTarget(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	h, err := delay.NewHandler(time.Second, 64, delay.Stall{}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestHTTPTrial(t *testing.T) {
	for _, c := range []struct {
		connection string
		maxConns   int64
	}{{"reuse", 5}, {"fresh", 20}} {
		t.Run(c.connection, func(t *testing.T) {
			srv, conns := delayTarget(t)
			r, _ := trial(t, "--model", "goroutines", "--workload", "http", "--tasks", "20", "--workers", "5",
				"--rtt", "30ms", "--connection", c.connection, "--target-url", srv.URL+"/?bytes=100")
			if r.TasksOK != 20 || r.TasksFailed != 0 {
				t.Fatalf("ok %d failed %d: %v", r.TasksOK, r.TasksFailed, r.Errors)
			}
			if *r.FloorSeconds != 0.12 || r.WallSeconds < *r.FloorSeconds || r.LatencySeconds.P50 < 0.03 {
				t.Errorf("floor %v wall %v latency %+v", *r.FloorSeconds, r.WallSeconds, r.LatencySeconds)
			}
			if got := conns.Load(); got > c.maxConns || c.connection == "fresh" && got != c.maxConns {
				t.Errorf("%d connections for %s with 5 workers and 20 tasks", got, c.connection)
			}
		})
	}
}

func TestHTTPFailuresAreMeasured(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	r, _ := trial(t, "--model", "goroutines", "--workload", "http", "--tasks", "10",
		"--rtt", "1ms", "--target-url", srv.URL)
	if r.TasksOK != 0 || r.TasksFailed != 10 || r.ThroughputPerSecond != 0 {
		t.Errorf("ok %d failed %d throughput %v", r.TasksOK, r.TasksFailed, r.ThroughputPerSecond)
	}
	if len(r.Errors) != 1 || r.Errors[0] != (ErrorCount{"HTTP 503 Service Unavailable", 10}) {
		t.Errorf("errors %+v", r.Errors)
	}
	if r.FailureKinds == nil || *r.FailureKinds != (FailureKinds{Status: 10}) {
		t.Errorf("failure kinds %+v, want 10 of status", r.FailureKinds)
	}

	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens now
	r, _ = trial(t, "--model", "goroutines", "--workload", "http", "--tasks", "10", "--workers", "3",
		"--rtt", "1ms", "--target-url", "http://"+addr+"/")
	if r.TasksFailed != 10 || len(r.Errors) != 1 || r.Errors[0].Count != 10 || !strings.Contains(r.Errors[0].Message, "refused") {
		t.Errorf("failed %d errors %+v", r.TasksFailed, r.Errors)
	}
	if r.FailureKinds == nil || *r.FailureKinds != (FailureKinds{Connect: 10}) {
		t.Errorf("failure kinds %+v, want 10 of connect", r.FailureKinds)
	}
}
