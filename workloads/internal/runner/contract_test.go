package runner

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"cxlab.dev/workloads/internal/delay"
	"cxlab.dev/workloads/internal/metrics"
)

// runnerContract is runner-contract.json, the contract's machine-readable part, which the
// Python runner and the spec read at run time; this runner is checked against it here.
type runnerContract struct {
	Flags  map[string]*string `json:"flags"`
	Models struct {
		Python []string `json:"python"`
		Go     []string `json:"go"`
	} `json:"models"`
	Workloads   []string `json:"workloads"`
	Connections []string `json:"connections"`
	URLSchemes  []string `json:"targetUrlSchemes"`
	TargetModes []string `json:"targetModes"`
	HTTPRequest struct {
		Methods          []string `json:"methods"`
		ForbiddenHeaders []string `json:"forbiddenHeaders"`
		MaxHeaders       int      `json:"maxHeaders"`
	} `json:"httpRequest"`
	HTTPResponse struct {
		MaxHeaderBytes int64 `json:"maxHeaderBytes"`
	} `json:"httpResponse"`
	FailureKinds struct {
		Kinds []string `json:"kinds"`
	} `json:"failureKinds"`
	ExitStatus     map[string]int `json:"exitStatus"`
	ResultMaxBytes int            `json:"resultMaxBytes"`
	LatencyBuckets []float64      `json:"latencyBucketsSeconds"`
	Histogram      struct {
		InitialSchema int `json:"initialSchema"`
		MinSchema     int `json:"minSchema"`
		MaxBuckets    int `json:"maxBuckets"`
	} `json:"latencyHistogram"`
	LatencyFigures struct {
		SignificantDigits int `json:"significantDigits"`
	} `json:"latencyFigures"`
	Metrics          map[string]string `json:"metrics"`
	ArrivalProcesses []string          `json:"arrivalProcesses"`
	OnBusy           []string          `json:"onBusy"`
	Timeline         struct {
		MaxIntervals int `json:"maxIntervals"`
	} `json:"timeline"`
	Saturation struct {
		MinIssuedShare float64 `json:"minIssuedShare"`
	} `json:"saturation"`
}

// readJSON decodes one of the contract's shared files (paths from this package).
func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

func loadContract(t *testing.T) runnerContract {
	var c runnerContract
	readJSON(t, "../../python/cxlab_contract/runner-contract.json", &c)
	return c
}

func TestTheGoRunnerKeepsTheContract(t *testing.T) {
	c := loadContract(t)
	if !slices.Equal(c.Models.Go, []string{"goroutines"}) || !slices.Equal(c.Models.Python, pythonModels) {
		t.Errorf("models: contract %v + %v, Go runner goroutines + %v", c.Models.Python, c.Models.Go, pythonModels)
	}
	if !slices.Equal(c.Workloads, workloads) || !slices.Equal(c.Connections, connections) {
		t.Errorf("workloads %v / connections %v in the contract, %v / %v here", c.Workloads, c.Connections, workloads, connections)
	}
	if !slices.Equal(c.URLSchemes, urlSchemes) {
		t.Errorf("--target-url schemes: contract %v, Go runner %v", c.URLSchemes, urlSchemes)
	}
	if !slices.Equal(c.TargetModes, targetModes) {
		t.Errorf("--target-mode: contract %v, Go runner %v", c.TargetModes, targetModes)
	}
	if h := c.HTTPRequest; !slices.Equal(h.Methods, httpMethods) || !slices.Equal(h.ForbiddenHeaders, forbiddenHeaders) || h.MaxHeaders != maxHeaders {
		t.Errorf("httpRequest: contract %+v, Go runner methods %v, forbidden headers %v, at most %d",
			h, httpMethods, forbiddenHeaders, maxHeaders)
	}
	if got := c.HTTPResponse.MaxHeaderBytes; got != maxResponseHeaderBytes {
		t.Errorf("httpResponse.maxHeaderBytes: contract %d, Go runner %d", got, maxResponseHeaderBytes)
	}
	// The kinds: the contract's, the counter's labels and the Result's keys, in one order.
	var keys []string
	for k := range reflect.TypeFor[FailureKinds]().Fields() {
		keys = append(keys, strings.Split(k.Tag.Get("json"), ",")[0])
	}
	if !slices.Equal(c.FailureKinds.Kinds, metrics.FailureKinds[:]) || !slices.Equal(keys, metrics.FailureKinds[:]) {
		t.Errorf("failure kinds: contract %v, Go runner's counter %v, its Result's %v", c.FailureKinds.Kinds, metrics.FailureKinds, keys)
	}
	want := map[string]int{"ok": ExitOK, "crash": ExitCrash, "usage": ExitUsage, "notReleased": ExitNotReleased, "stoppedBySIGTERM": 128 + int(syscall.SIGTERM)}
	for name, status := range want {
		if c.ExitStatus[name] != status {
			t.Errorf("exit status %s: contract %d, Go runner %d", name, c.ExitStatus[name], status)
		}
	}
	if len(c.ExitStatus) != len(want) {
		t.Errorf("exit statuses: contract %v, Go runner %v", c.ExitStatus, want)
	}
	if c.ResultMaxBytes != MaxResultBytes {
		t.Errorf("Result bound: contract %d, Go runner %d", c.ResultMaxBytes, MaxResultBytes)
	}
	if !slices.Equal(c.LatencyBuckets, metrics.Buckets[:]) {
		t.Errorf("buckets: contract %v, Go runner %v", c.LatencyBuckets, metrics.Buckets)
	}
	if !slices.Equal(c.ArrivalProcesses, processes) || !slices.Equal(c.OnBusy, onBusyModes) {
		t.Errorf("--arrival %v / --on-busy %v in the contract, %v / %v here", c.ArrivalProcesses, c.OnBusy, processes, onBusyModes)
	}
	if c.Timeline.MaxIntervals != maxIntervals || c.Saturation.MinIssuedShare != minIssuedShare {
		t.Errorf("timeline of %d intervals, saturated under %v issued in the contract; %d and %v here",
			c.Timeline.MaxIntervals, c.Saturation.MinIssuedShare, maxIntervals, minIssuedShare)
	}
	if h := c.Histogram; h.InitialSchema != initialSchema || h.MinSchema != minSchema || h.MaxBuckets != maxBuckets {
		t.Errorf("latencyHistogram: contract %+v, Go runner schema %d down to %d, %d buckets",
			h, initialSchema, minSchema, maxBuckets)
	}
	if c.LatencyFigures.SignificantDigits != significantDigits {
		t.Errorf("latencyFigures: %d significant digits in the contract, %d here",
			c.LatencyFigures.SignificantDigits, significantDigits)
	}
}

func TestTheGoRunnerTakesTheContractsFlags(t *testing.T) {
	c := loadContract(t)
	seen := map[string]bool{}
	newFlagSet(&Config{}, io.Discard).VisitAll(func(f *flag.Flag) {
		seen[f.Name] = true
		want, ok := c.Flags[f.Name]
		switch {
		case !ok:
			t.Errorf("--%s: a Go runner flag the contract does not have", f.Name)
		case want != nil && *want != f.DefValue:
			t.Errorf("--%s: default %q in the contract, %q here", f.Name, *want, f.DefValue)
		}
	})
	for name := range c.Flags {
		if !seen[name] {
			t.Errorf("--%s: in the contract, not taken by the Go runner", name)
		}
	}
}

func TestTheGoRunnerExposesTheContractsMetrics(t *testing.T) {
	c := loadContract(t)
	reg := prometheus.NewRegistry()
	if _, err := metrics.NewTrial(reg, metrics.Info{Model: "goroutines", Workload: "sleep", Tasks: 1}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		got[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	for name, kind := range c.Metrics {
		if got[name] != kind {
			t.Errorf("%s: contract %s, Go runner %q", name, kind, got[name])
		}
	}
	for name := range got {
		if _, ok := c.Metrics[name]; !ok {
			t.Errorf("%s: exposed by the Go runner, not in the contract", name)
		}
	}
}

// Each limit of the contract is taken at its bounds and refused one step past them: the spec
// promises exactly these numbers, so the runner must accept all it lets through.
func TestTheGoRunnerKeepsTheContractsLimits(t *testing.T) {
	var c struct {
		Limits map[string]json.RawMessage `json:"limits"`
	}
	readJSON(t, "../../python/cxlab_contract/runner-contract.json", &c)
	type bounds struct{ Min, Max any }
	counted := func(flag string) func(string) []string {
		return func(v string) []string { return []string{"--tasks", "1", "--metrics-port", "9", "--" + flag, v} }
	}
	arrivals := func(flag string) func(string) []string {
		return func(v string) []string {
			return []string{"--arrival", "poisson", "--duration", "1s", "--rate", "10", "--" + flag, v}
		}
	}
	// The command line taking each limit's value: a flag beside what it needs.
	lines := map[string]func(string) []string{
		"tasks": counted("tasks"), "workers": counted("workers"), "iterations": counted("iterations"),
		"gomaxprocs": counted("gomaxprocs"), "rtt": counted("rtt"), "hold": counted("hold"), "pod": counted("pod"),
		"barrier-timeout": counted("barrier-timeout"), "final-read": counted("final-read"),
		"duration": func(v string) []string { return []string{"--workers", "1", "--duration", v} },
		"stage-duration": func(v string) []string {
			stages := v + ":1"
			if d, err := time.ParseDuration(v); err == nil && d < time.Second {
				stages = "1s:1," + stages // alone, it would make a run under a second
			}
			return []string{"--arrival", "uniform", "--rate", "1", "--stages", stages}
		},
		"stages": func(v string) []string {
			n, _ := strconv.Atoi(v)
			stages := strings.Repeat("1s:1,", max(n, 1)-1) + strings.Repeat("1s:1", min(n, 1))
			return []string{"--arrival", "uniform", "--rate", "1", "--stages", stages}
		},
		// From v to 2/s over 2s: at least 2 arrivals, at most a million more.
		"rate":    func(v string) []string { return []string{"--arrival", "uniform", "--rate", v, "--stages", "2s:2"} },
		"warmup":  func(v string) []string { return []string{"--workers", "1", "--duration", "24h", "--warmup", v} },
		"max-lag": arrivals("max-lag"),
		"seed":    arrivals("seed"),
		"request-timeout": func(v string) []string {
			return []string{"--workload", "http", "--tasks", "1", "--target-url", "http://h/", "--request-timeout", v}
		},
		// A body of v bytes; none has fewer than none.
		"body": func(v string) []string {
			n, _ := strconv.Atoi(v)
			if n < 0 {
				return nil
			}
			return []string{"--workload", "http", "--tasks", "1", "--target-url", "http://h/", "--method", "POST", "--body", strings.Repeat("b", n)}
		},
	}
	// The run bounds --warmup too: 24h is within its limit, and less than no run.
	besides := map[string]string{"warmup": "must be less than the run"}
	past := func(v any, step int) string {
		switch v := v.(type) {
		case float64:
			return strconv.FormatInt(int64(v)+int64(step), 10)
		case string:
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			return (d + time.Duration(step)*time.Nanosecond).String()
		}
		t.Fatalf("limit %v: neither a number nor a duration", v)
		return ""
	}
	for name, raw := range c.Limits {
		if name == "description" {
			continue
		}
		var b bounds
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		if name == "pods" || name == "expect-workers" {
			continue // a spec field (models[].pods); a locust-only flag, refused here whatever it is
		}
		if name == "responseBytes" {
			if int(b.Max.(float64)) != delay.MaxResponseBytes || b.Min.(float64) != 0 {
				t.Errorf("responseBytes: contract %v..%v, the delay target 0..%d", b.Min, b.Max, delay.MaxResponseBytes)
			}
			continue
		}
		line, ok := lines[name]
		if !ok {
			t.Errorf("limit %s: no runner flag of that name", name)
			continue
		}
		for _, tc := range []struct {
			value string
			ok    bool
		}{{past(b.Min, 0), true}, {past(b.Max, 0), true}, {past(b.Min, -1), false}, {past(b.Max, 1), false}} {
			given := line(tc.value)
			if given == nil {
				continue // a value no flag can take
			}
			args := append([]string{"--model", "goroutines", "--workload", "sleep"}, given...)
			_, err := ParseFlags(args, io.Discard)
			if tc.ok && err != nil && (besides[name] == "" || !strings.Contains(err.Error(), besides[name])) {
				t.Errorf("%s is within the contract's limits, refused: %v", strings.Join(args, " "), err)
			}
			if !tc.ok && err == nil {
				t.Errorf("%s is past the contract's limits, accepted", strings.Join(args, " "))
			}
		}
	}
}
