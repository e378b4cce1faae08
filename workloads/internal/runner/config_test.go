package runner

import (
	"errors"
	"flag"
	"io"
	"net/url"
	"reflect"
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
		MetricsPort: 9, ResultPath: "/tmp/x", Linger: 2 * time.Second, Experiment: "e", Trial: "t",
		OnBusy: "queue", MaxLag: 10 * time.Millisecond, Seed: 1,
		TargetMode: "delay", Method: "GET", OKStatus: "200-299"}
	if !reflect.DeepEqual(c, want) {
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
	// Duration runs (CONTRACT.md): each refusal names its flag.
	sleep := "--model goroutines --workload sleep "
	arrivals := sleep + "--arrival uniform --duration 1s --rate 10 "
	for name, c := range map[string]struct{ args, flag string }{
		"tasks beside a duration":    {sleep + "--tasks 5 --workers 1 --duration 2s", "--tasks"},
		"tasks beside stages":        {sleep + "--tasks 5 --arrival uniform --stages 1s:5", "--tasks"},
		"duration under a second":    {sleep + "--workers 1 --duration 500ms", "--duration"},
		"duration over a day":        {sleep + "--workers 1 --duration 25h", "--duration"},
		"closed loop of workers 0":   {sleep + "--duration 2s", "--workers"},
		"arrival without a span":     {sleep + "--tasks 5 --arrival uniform --rate 5", "--arrival"},
		"unknown arrival":            {sleep + "--arrival bursty --duration 1s --rate 5", "--arrival"},
		"stages and duration":        {sleep + "--arrival uniform --duration 2s --stages 1s:5", "--stages"},
		"stages without arrival":     {sleep + "--workers 1 --stages 1s:5", "--stages"},
		"stages not D:R":             {sleep + "--arrival uniform --stages 1s", "--stages"},
		"stage rate not a number":    {sleep + "--arrival uniform --stages 1s:lots", "--stages"},
		"stage rate too high":        {sleep + "--arrival uniform --stages 1s:1000001", "--stages"},
		"stage negative":             {sleep + "--arrival uniform --stages 2s:5,-1s:5", "--stages"},
		"stages too short":           {sleep + "--arrival uniform --rate 5 --stages 500ms:5", "--stages"},
		"too many stages":            {sleep + "--arrival uniform --stages " + strings.Repeat("1s:5,", 32) + "1s:5", "--stages"},
		"rate without arrival":       {sleep + "--workers 1 --duration 2s --rate 5", "--rate"},
		"rate NaN":                   {arrivals + "--rate NaN", "--rate"},
		"rate negative":              {arrivals + "--rate -1", "--rate"},
		"no arrival expected":        {arrivals + "--rate 0.5", "--rate"},
		"too many arrivals expected": {arrivals + "--rate 1000000 --duration 11s", "--rate"},
		"on-busy without arrival":    {sleep + "--workers 1 --duration 2s --on-busy drop", "--on-busy"},
		"unknown on-busy":            {arrivals + "--on-busy wait", "--on-busy"},
		"max-lag without arrival":    {sleep + "--workers 1 --duration 2s --max-lag 5ms", "--max-lag"},
		"max-lag too short":          {arrivals + "--max-lag 999us", "--max-lag"},
		"seed without arrival":       {sleep + "--workers 1 --duration 2s --seed 7", "--seed"},
		"seed past 2^53-1":           {arrivals + "--arrival poisson --seed 9007199254740992", "--seed"},
		"warmup of a counted trial":  {base + "--warmup 1s", "--warmup"},
		"warmup as long as the run":  {sleep + "--workers 1 --duration 2s --warmup 2s", "--warmup"},
		"warmup as long as stages":   {sleep + "--arrival uniform --stages 1s:5,1s:5 --warmup 2s", "--warmup"},
	} {
		_, err := ParseFlags(strings.Fields(c.args), io.Discard)
		var usage *UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: got %v, want a UsageError naming %s", name, err, c.flag)
		}
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

func TestParseFlagsTakesDurationRuns(t *testing.T) {
	for _, args := range []string{
		"--workers 4 --duration 2s --warmup 1s",
		"--arrival uniform --rate 100 --duration 1m --workers 8 --on-busy drop --max-lag 50ms --warmup 10s",
		"--arrival poisson --rate 0 --stages 10s:100,0s:50,10s:50,5s:0 --seed 0",
		"--arrival uniform --rate 1 --duration 1s --workers 0",
	} {
		if _, err := ParseFlags(strings.Fields("--model goroutines --workload sleep "+args), io.Discard); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
}

func TestResolvedWorkers(t *testing.T) {
	for _, c := range []struct {
		tasks, workers int
		duration       time.Duration
		arrival        string
		want           int
	}{
		{10, 0, 0, "", 10}, {10, 3, 0, "", 3}, {10, 10, 0, "", 10}, {10, 50, 0, "", 10},
		{0, 4, time.Second, "", 4},         // a closed loop for a duration: its tasks are an output
		{7, 0, time.Second, "uniform", 7},  // one per arrival
		{0, 0, time.Second, "poisson", 1},  // a draw of no arrival still has a worker
		{7, 20, time.Second, "uniform", 7}, // never more than arrivals
		{70, 20, time.Second, "uniform", 20},
	} {
		cfg := Config{Tasks: c.tasks, Workers: c.workers, Duration: c.duration, Arrival: c.arrival}
		if got := cfg.ResolvedWorkers(); got != c.want {
			t.Errorf("%+v: got %d, want %d", c, got, c.want)
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
