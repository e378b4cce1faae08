package runner

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
	Workloads      []string          `json:"workloads"`
	Connections    []string          `json:"connections"`
	URLSchemes     []string          `json:"targetUrlSchemes"`
	ExitStatus     map[string]int    `json:"exitStatus"`
	ResultMaxBytes int               `json:"resultMaxBytes"`
	LatencyBuckets []float64         `json:"latencyBucketsSeconds"`
	Metrics        map[string]string `json:"metrics"`
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
	want := map[string]int{"ok": ExitOK, "crash": ExitCrash, "usage": ExitUsage, "stoppedBySIGTERM": 128 + int(syscall.SIGTERM)}
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
