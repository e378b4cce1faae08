package runner

import (
	"errors"
	"flag"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsAcceptsBothDashes(t *testing.T) {
	c, err := ParseFlags(strings.Fields(
		"-model goroutines --workload http -tasks 5 --workers 2 --rtt 1.5s -gomaxprocs 1 "+
			"--target-url http://h:1/p --connection reuse --metrics-port 9 --linger 2s "+
			"--experiment e --trial t --result-path /tmp/x"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Model: "goroutines", Workload: "http", Tasks: 5, Workers: 2, RTT: 1500 * time.Millisecond,
		Iterations: 1_000_000, GOMAXPROCS: 1, TargetURL: "http://h:1/p", Connection: "reuse",
		MetricsPort: 9, ResultPath: "/tmp/x", Linger: 2 * time.Second, Experiment: "e", Trial: "t"}
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	base := "--model goroutines --workload sleep --tasks 3 "
	bad := map[string]string{
		"no model":         "--workload sleep --tasks 1",
		"python model":     "--model asyncio --workload sleep --tasks 1",
		"unknown model":    "--model fibers --workload sleep --tasks 1",
		"no workload":      "--model goroutines --tasks 1",
		"unknown workload": "--model goroutines --workload nap --tasks 1",
		"no tasks":         "--model goroutines --workload sleep",
		"zero tasks":       base + "--tasks 0",
		"negative workers": base + "--workers -1",
		"bad rtt":          base + "--rtt 100",
		"negative rtt":     base + "--rtt -1s",
		"zero iterations":  base + "--iterations 0",
		"negative hold":    base + "--hold -5ms",
		"bad gomaxprocs":   base + "--gomaxprocs -2",
		"bad connection":   base + "--connection pooled",
		"port too big":     base + "--metrics-port 70000",
		"negative linger":  base + "--linger -1s",
		"http without url": "--model goroutines --workload http --tasks 1",
		"http bad url":     "--model goroutines --workload http --tasks 1 --target-url ftp://x/",
		"unknown flag":     base + "--bogus 1",
		"stray argument":   base + "extra",
		"not a number":     base + "--workers many",
	}
	for name, args := range bad {
		_, err := ParseFlags(strings.Fields(args), io.Discard)
		var usage *UsageError
		if !errors.As(err, &usage) {
			t.Errorf("%s: got %v, want a UsageError", name, err)
		}
	}
	if _, err := ParseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
}

func TestMainExitsTwoOnBadFlags(t *testing.T) {
	var stdout, stderr strings.Builder
	if got := Main([]string{"--model", "threads", "--workload", "sleep", "--tasks", "1"}, &stdout, &stderr); got != ExitUsage {
		t.Errorf("exit %d, want %d", got, ExitUsage)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout not empty: %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "goroutines") {
		t.Errorf("message does not say what this runner serves: %q", stderr.String())
	}
}

func TestResolvedWorkers(t *testing.T) {
	for _, c := range []struct{ tasks, workers, want int }{
		{10, 0, 10}, {10, 3, 3}, {10, 10, 10}, {10, 50, 10},
	} {
		cfg := Config{Tasks: c.tasks, Workers: c.workers}
		if got := cfg.ResolvedWorkers(); got != c.want {
			t.Errorf("tasks %d workers %d: got %d, want %d", c.tasks, c.workers, got, c.want)
		}
	}
}

func TestTaskURLKeepsQuery(t *testing.T) {
	got, err := taskURL("http://target:8080/delay?bytes=512&rtt=9s", 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(got)
	if q := u.Query(); q.Get("bytes") != "512" || q.Get("rtt") != "250ms" || len(q["rtt"]) != 1 {
		t.Errorf("got %s", got)
	}
	if u.Path != "/delay" || u.Host != "target:8080" {
		t.Errorf("got %s", got)
	}
	got, _ = taskURL("http://target:8080", 0)
	if got != "http://target:8080?rtt=0s" {
		t.Errorf("got %s", got)
	}
}
