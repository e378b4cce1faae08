package runner

import (
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cxlab.dev/workloads/internal/measure"
)

func TestFloor(t *testing.T) {
	for _, c := range []struct {
		tasks, workers int
		d, want        time.Duration
	}{
		{50, 10, ms(20), ms(100)},
		{51, 10, ms(20), ms(120)}, // a partial round still costs a whole rtt
		{1_000_000, 1_000_000, ms(200), ms(200)},
		{7, 1, ms(3), ms(21)},
	} {
		if got := Floor(c.tasks, c.workers, c.d); got != c.want {
			t.Errorf("Floor(%d, %d, %v) = %v, want %v", c.tasks, c.workers, c.d, got, c.want)
		}
	}
}

func TestSetParameters(t *testing.T) {
	sleep := Config{Workload: "sleep", Tasks: 50, Workers: 10, RTT: ms(20), Hold: ms(5), Iterations: 9}
	r := Result{Workers: sleep.ResolvedWorkers()}
	r.setParameters(&sleep, 0.2)
	if r.RTTSeconds == nil || *r.RTTSeconds != 0.02 || r.HoldSeconds != nil || r.Iterations != nil {
		t.Errorf("sleep parameters: rtt %v hold %v iterations %v", r.RTTSeconds, r.HoldSeconds, r.Iterations)
	}
	if r.FloorSeconds == nil || *r.FloorSeconds != 0.1 || r.Efficiency == nil || *r.Efficiency != 0.5 {
		t.Errorf("sleep floor %v efficiency %v, want 0.1 and 0.5", r.FloorSeconds, r.Efficiency)
	}

	hold := Config{Workload: "hold", Tasks: 4, Workers: 0, RTT: ms(20), Hold: ms(300)}
	r = Result{Workers: hold.ResolvedWorkers()}
	r.setParameters(&hold, 0.6)
	if r.HoldSeconds == nil || *r.HoldSeconds != 0.3 || r.RTTSeconds != nil || *r.FloorSeconds != 0.3 || *r.Efficiency != 0.5 {
		t.Errorf("hold: %+v", r)
	}

	cpu := Config{Workload: "cpu", Tasks: 4, Iterations: 1000}
	r = Result{Workers: cpu.ResolvedWorkers()}
	r.setParameters(&cpu, 1)
	if r.Iterations == nil || *r.Iterations != 1000 || r.FloorSeconds != nil || r.Efficiency != nil || r.RTTSeconds != nil {
		t.Errorf("cpu: %+v", r)
	}
}

func TestCountIsNotOptimisedAway(t *testing.T) {
	if got := count(12345); got != 12345 {
		t.Fatalf("count(12345) = %d", got)
	}
}

func TestErrorTally(t *testing.T) {
	var e errorTally
	for range 3 {
		e.add("b")
	}
	for range 5 {
		e.add("a")
	}
	e.add("c")
	e.add("d")
	e.add("e")
	e.add("f")
	e.add(strings.Repeat("é", 300))
	got := e.top(maxErrorKinds)
	if len(got) != 5 || got[0] != (ErrorCount{"a", 5}) || got[1] != (ErrorCount{"b", 3}) {
		t.Fatalf("got %+v", got)
	}
	for _, ec := range got {
		if n := len([]rune(ec.Message)); n > maxMessageRunes {
			t.Errorf("message of %d characters kept", n)
		}
	}
	if s := truncate(strings.Repeat("é", 300), 200); len([]rune(s)) != 200 || !strings.HasPrefix(strings.Repeat("é", 300), s) {
		t.Errorf("truncate split a character or miscounted: %d runes", len([]rune(s)))
	}
}

func TestErrorTallyIsBounded(t *testing.T) {
	var e errorTally
	for i := range maxTracked + 100 {
		e.add(strconv.Itoa(i))
	}
	if len(e.counts) > maxTracked+1 {
		t.Fatalf("%d distinct messages tracked", len(e.counts))
	}
	if got := e.top(1); got[0].Message != otherErrors || got[0].Count != 100 {
		t.Errorf("got %+v", got)
	}
}

func TestErrorMessageDropsLocalPort(t *testing.T) {
	op := func(port int) error {
		return &net.OpError{Op: "read", Net: "tcp",
			Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
			Addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080},
			Err:    errors.New("connection reset by peer")}
	}
	a, b := errorMessage(op(40001)), errorMessage(op(40002))
	if a != b || strings.Contains(a, "4000") || !strings.Contains(a, "127.0.0.1:8080") {
		t.Errorf("got %q and %q", a, b)
	}
}

// The Result's keys must be exactly the schema's: required, no extras.
func TestResultKeysMatchSchema(t *testing.T) {
	raw, err := os.ReadFile("../../python/cxlab_contract/result-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	b, err := Result{Workers: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(got))
	want := slices.Sorted(slices.Values(schema.Required))
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v\nschema requires %v", keys, want)
	}
	for _, arr := range []string{"cpus", "errors"} {
		if _, ok := got[arr].([]any); !ok {
			t.Errorf("%s is %v, want an array", arr, got[arr])
		}
	}
	// With its host and its failure kinds, the optional keys (absent from older Results), a
	// Result has every property of the schema.
	b, err = Result{Workers: 1, Host: &measure.Host{CPUModel: "c", Kernel: "k"}, FailureKinds: &FailureKinds{}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys = slices.Sorted(maps.Keys(got))
	if properties := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(keys, properties) {
		t.Errorf("keys %v\nschema's properties %v", keys, properties)
	}
}

// A trial's Result carries this machine's host: a CPU model and the kernel uname -r prints
// (tests/runners/test_result.py checks both runners write the same).
func TestTheResultHasItsHost(t *testing.T) {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := trial(t, "--model", "goroutines", "--workload", "sleep", "--tasks", "2", "--rtt", "1ms")
	if r.Host == nil {
		t.Fatal("no host")
	}
	if r.Host.CPUModel == "" {
		t.Errorf("empty cpuModel")
	}
	if want := strings.TrimSpace(string(out)); r.Host.Kernel != want {
		t.Errorf("kernel %q, uname -r says %q", r.Host.Kernel, want)
	}
}

func TestEncodeStaysUnderLimit(t *testing.T) {
	r := Result{Workers: 1, CPUs: []int{0}}
	for i := range maxErrorKinds {
		r.Errors = append(r.Errors, ErrorCount{strings.Repeat(string(rune('a'+i)), maxMessageRunes), 1})
	}
	r.Experiment = strings.Repeat("e", 2500) // labels are not bounded by the schema
	r.RSSTimeline.RSSBytes = make([]int64, 64)
	for i := range r.RSSTimeline.RSSBytes {
		r.RSSTimeline.RSSBytes[i] = 1 << 40
	}
	r.RSSTimeline.IntervalSeconds = 0.05
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("%d bytes", len(b))
	}
	if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		t.Errorf("not one line: %q", b)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Errors) == maxErrorKinds {
		t.Errorf("errors not dropped")
	}
}
