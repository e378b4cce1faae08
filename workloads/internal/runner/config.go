// Package runner runs one trial of the goroutines model and reports it as a
// CONTRACT.md Result.
package runner

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Config is a trial as given on the command line.
type Config struct {
	Model              string
	Workload           string
	Tasks              int           // 0 with --duration or --stages; an arrival run's scheduled arrivals once drawn (Main)
	Workers            int           // 0 = one worker per task (per arrival)
	Duration           time.Duration // > 0: a duration run, a closed loop for D or arrivals over D
	Arrival            string        // uniform or poisson: an arrival run (open loop)
	Rate               float64       // arrivals per second, or the rate the first stage ramps from
	Stages             string        // D1:R1,D2:R2 as given (parsed by profile)
	OnBusy             string        // queue or drop: an arrival with every worker busy
	Warmup             time.Duration // duration runs: left out of the latency figures
	MaxLag             time.Duration // the generator's lag p99 bound
	Seed               uint64        // poisson: the seed of the gaps
	RTT                time.Duration
	Iterations         int
	Hold               time.Duration
	GOMAXPROCS         int // 0 = the Go default
	TargetURL          string
	TargetMode         string        // delay (rtt=<rtt> added to the query) or direct (the URL as given)
	Method             string        // http: one of httpMethods
	Headers            repeated      // http: --header 'Name: value', as given
	HeaderEnvs         repeated      // http: --header-env 'Name=VAR', as given (the values are read from the environment)
	Body               string        // http: sent with Content-Length
	OKStatus           string        // http: the statuses counted as success, as given (200-299,304)
	RequestTimeout     time.Duration // http: the most one request may take; 0 = RTT + httpTimeout
	TLSCA              string        // http: a PEM file of the CAs an https target must chain to
	InsecureSkipVerify bool          // http: no certificate check at all
	Connection         string
	MetricsPort        int
	ResultPath         string
	Linger             time.Duration
	FinalRead          time.Duration // after the Result, wait this long for GET /metrics?final=1; 0 = not
	Experiment         string
	Trial              string
	Pool               string // threads and processes only: must stay empty here
	Syscalls           bool
	Pod                int           // index among the trial's Pods
	BarrierTimeout     time.Duration // wait this long at the start barrier; 0 = none
	LocustMaster       string        // locust only: must stay empty here
	ExpectWorkers      int           // locust only: must stay 0 here
}

// Workloads and connection modes the contract defines.
var (
	workloads    = []string{"sleep", "http", "cpu", "hold"}
	connections  = []string{"fresh", "reuse"}
	urlSchemes   = []string{"http", "https"} // --target-url (targetUrlSchemes)
	pythonModels = []string{"sequential", "threads", "processes", "gevent", "asyncio", "locust"}
	processes    = []string{"uniform", "poisson"} // --arrival (arrivalProcesses)
	onBusyModes  = []string{"queue", "drop"}
)

// Defaults of the arrival flags that mean something only with --arrival: any other value
// without it is refused.
const (
	defaultOnBusy = "queue"
	defaultMaxLag = 10 * time.Millisecond
	defaultSeed   = 1
)

// Inclusive bounds of the numeric flags: the contract's limits (runner-contract.json), which
// the spec enforces with the same numbers; TestTheGoRunnerKeepsTheContractsLimits checks them.
const (
	maxTasks      = 10_000_000
	maxWorkers    = 10_000_000
	maxIterations = 10_000_000_000
	maxGOMAXPROCS = 1024
	maxRTT        = time.Hour
	maxHold       = time.Hour
	maxPod        = 64
	maxBarrier    = time.Hour
	maxFinalRead  = time.Hour
	maxExpected   = 64
	minDuration   = time.Second // also the stages' sum
	maxDuration   = 24 * time.Hour
	maxStageTime  = 24 * time.Hour
	maxStages     = 32
	maxRate       = 1_000_000
	maxWarmup     = 24 * time.Hour
	minMaxLag     = time.Millisecond
	maxMaxLag     = time.Minute
	maxSeed       = 1<<53 - 1
)

// UsageError is a bad command line: exit status 2.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &UsageError{fmt.Sprintf(format, a...)}
}

// ParseFlags reads the contract's flags (one or two dashes). It returns
// flag.ErrHelp for -h, a *UsageError for anything else wrong.
func ParseFlags(args []string, output io.Writer) (Config, error) {
	var c Config
	fs := newFlagSet(&c, output)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, &UsageError{err.Error()} // the flag package has already printed usage
	}
	if fs.NArg() > 0 {
		return c, usageErrorf("unexpected arguments: %q", fs.Args())
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	if c.Workload != "http" {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains(httpFlags, f.Name) {
				given = append(given, "--"+f.Name)
			}
		})
		if len(given) > 0 {
			return c, usageErrorf("%s: the http workload's only, not %s", strings.Join(given, ", "), c.Workload)
		}
	}
	return c, nil
}

// newFlagSet declares the contract's flags into c (the contract test lists them too).
func newFlagSet(c *Config, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cxlab-runner-go", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.Model, "model", "", "concurrency model; this runner serves only `goroutines`")
	fs.StringVar(&c.Workload, "workload", "", "sleep, http, cpu or hold")
	fs.IntVar(&c.Tasks, "tasks", 0, "number of tasks, at least 1; required unless --duration or --stages")
	fs.IntVar(&c.Workers, "workers", 0, "workers pulling tasks; 0 = one per task (per arrival)")
	fs.DurationVar(&c.Duration, "duration", 0, "run for this long: a closed loop of --workers, or with --arrival the span tasks arrive over")
	fs.StringVar(&c.Arrival, "arrival", "", "open loop: tasks arrive at --rate, uniform or poisson; needs --duration or --stages")
	fs.Float64Var(&c.Rate, "rate", 0, "--arrival: arrivals per second (with --stages, the rate the first stage ramps from)")
	fs.StringVar(&c.Stages, "stages", "", "--arrival: D1:R1,D2:R2 ramps the rate linearly to Ri over Di; the run lasts their sum")
	fs.StringVar(&c.OnBusy, "on-busy", defaultOnBusy, "--arrival: an arrival finding every worker busy waits (queue) or is dropped (drop)")
	fs.DurationVar(&c.Warmup, "warmup", 0, "duration runs: tasks arriving (closed loop: starting) in the first D are reported apart")
	fs.DurationVar(&c.MaxLag, "max-lag", defaultMaxLag, "--arrival: the generator is saturated when its lag p99 exceeds this")
	fs.Uint64Var(&c.Seed, "seed", defaultSeed, "--arrival poisson: the seed of the random gaps")
	fs.DurationVar(&c.RTT, "rtt", 0, "round-trip time for sleep and http")
	fs.IntVar(&c.Iterations, "iterations", 1_000_000, "count-loop iterations per task for cpu")
	fs.DurationVar(&c.Hold, "hold", 0, "how long each task stays alive for hold")
	fs.IntVar(&c.GOMAXPROCS, "gomaxprocs", 0, "GOMAXPROCS; 0 = the Go default")
	fs.StringVar(&c.TargetURL, "target-url", "", "http: an http:// or https:// URL, the delay target (rtt=<rtt> is added) or with --target-mode direct your own service")
	fs.StringVar(&c.TargetMode, "target-mode", "delay", "http: delay (rtt=<rtt> is added to --target-url's query) or direct (the URL is sent as given)")
	fs.StringVar(&c.Method, "method", "GET", "http: the request's method, one of "+strings.Join(httpMethods, ", "))
	fs.Var(&c.Headers, "header", "http, repeatable: a header sent with every request, `'Name: value'`")
	fs.Var(&c.HeaderEnvs, "header-env", "http, repeatable: a header whose value is the environment variable VAR, `'Name=VAR'` (unset or empty: refused)")
	fs.StringVar(&c.Body, "body", "", "http: the request body, sent with Content-Length (at most 64 KiB)")
	fs.StringVar(&c.OKStatus, "ok-status", defaultOKStatus, "http: the statuses counted as success, codes and ranges 100-599 (`200-299,304`); any other fails the task (kind status)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 0, "http: the most one request may take, the whole answer read, 0s..10m; 0s = the RTT + 2m")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "https: a PEM `file` of the CA certificates the target's must chain to, instead of the system's")
	fs.BoolVar(&c.InsecureSkipVerify, "insecure-skip-verify", false, "https: do not check the target's certificate at all (not with --tls-ca)")
	fs.StringVar(&c.Connection, "connection", "fresh", "http: fresh (new connection per task) or reuse (keep-alive)")
	fs.IntVar(&c.MetricsPort, "metrics-port", 0, "serve Prometheus metrics on 0.0.0.0:P/metrics; 0 = none")
	fs.StringVar(&c.ResultPath, "result-path", "", "also write the Result JSON to this file")
	fs.DurationVar(&c.Linger, "linger", 0, "keep serving metrics this long after the tasks")
	fs.DurationVar(&c.FinalRead, "final-read", 0, "after the tasks, wait this long for one GET /metrics?final=1 (GET /done answers 200 meanwhile); 0 = do not wait")
	fs.StringVar(&c.Experiment, "experiment", "", "experiment label")
	fs.StringVar(&c.Trial, "trial", "", "trial label")
	fs.StringVar(&c.Pool, "pool", "", "threads and processes only; empty here")
	fs.BoolVar(&c.Syscalls, "syscalls", false, "count system calls (the Result says they are unavailable here)")
	fs.IntVar(&c.Pod, "pod", 0, "index among the trial's Pods")
	fs.DurationVar(&c.BarrierTimeout, "barrier-timeout", 0, "wait at the start barrier this long (POST /start releases it); 0 = none")
	fs.StringVar(&c.LocustMaster, "locust-master", "", "locust only; empty here")
	fs.IntVar(&c.ExpectWorkers, "expect-workers", 0, "locust only; 0 here")
	return fs
}

func (c *Config) validate() error {
	switch {
	case c.Model == "":
		return usageErrorf("--model is required (this runner serves goroutines)")
	case slices.Contains(pythonModels, c.Model):
		return usageErrorf("--model %s is a Python model: run it with python -m cxlab_runner; cxlab-runner-go serves only goroutines", c.Model)
	case c.Model != "goroutines":
		return usageErrorf("unknown --model %q: cxlab-runner-go serves only goroutines", c.Model)
	case c.Workload == "":
		return usageErrorf("--workload is required (%v)", workloads)
	case !slices.Contains(workloads, c.Workload):
		return usageErrorf("unknown --workload %q (want one of %v)", c.Workload, workloads)
	case c.Tasks < 0 || c.Tasks > maxTasks:
		return usageErrorf("--tasks must be 1..%d, got %d", maxTasks, c.Tasks)
	case c.Tasks == 0 && !c.timed():
		return usageErrorf("--tasks is required (1..%d) unless --duration or --stages is given", maxTasks)
	case c.Tasks != 0 && c.timed():
		return usageErrorf("--tasks counts a run, --duration and --stages time one: give --tasks or them, not both")
	case c.Workers < 0 || c.Workers > maxWorkers:
		return usageErrorf("--workers must be 0..%d, got %d", maxWorkers, c.Workers)
	case c.RTT < 0 || c.RTT > maxRTT:
		return usageErrorf("--rtt must be 0s..%v, got %v", maxRTT, c.RTT)
	case c.Iterations < 1 || c.Iterations > maxIterations:
		return usageErrorf("--iterations must be 1..%d, got %d", maxIterations, c.Iterations)
	case c.Hold < 0 || c.Hold > maxHold:
		return usageErrorf("--hold must be 0s..%v, got %v", maxHold, c.Hold)
	case c.GOMAXPROCS < 0 || c.GOMAXPROCS > maxGOMAXPROCS:
		return usageErrorf("--gomaxprocs must be 0..%d, got %d", maxGOMAXPROCS, c.GOMAXPROCS)
	case !slices.Contains(connections, c.Connection):
		return usageErrorf("unknown --connection %q (want fresh or reuse)", c.Connection)
	case c.MetricsPort < 0 || c.MetricsPort > 65535:
		return usageErrorf("--metrics-port must be 0..65535, got %d", c.MetricsPort)
	case c.Pool != "":
		return usageErrorf("--pool applies to threads and processes only, not to goroutines")
	case c.Linger < 0:
		return usageErrorf("--linger must not be negative, got %v", c.Linger)
	case c.FinalRead < 0 || c.FinalRead > maxFinalRead:
		return usageErrorf("--final-read must be 0s..%v, got %v", maxFinalRead, c.FinalRead)
	case c.FinalRead > 0 && c.MetricsPort == 0:
		return usageErrorf("--final-read needs --metrics-port: the final read is a GET /metrics")
	case c.Pod < 0 || c.Pod > maxPod:
		return usageErrorf("--pod must be 0..%d, got %d", maxPod, c.Pod)
	case c.BarrierTimeout < 0 || c.BarrierTimeout > maxBarrier:
		return usageErrorf("--barrier-timeout must be 0s..%v, got %v", maxBarrier, c.BarrierTimeout)
	case c.BarrierTimeout > 0 && c.MetricsPort == 0:
		return usageErrorf("--barrier-timeout needs --metrics-port: the barrier is released over HTTP")
	case c.ExpectWorkers < 0 || c.ExpectWorkers > maxExpected:
		return usageErrorf("--expect-workers must be 0..%d, got %d", maxExpected, c.ExpectWorkers)
	case c.LocustMaster != "" || c.ExpectWorkers != 0:
		return usageErrorf("--locust-master and --expect-workers apply to locust only, not to goroutines")
	case c.Workload == "http" && c.TargetURL == "":
		return usageErrorf("--workload http needs --target-url")
	}
	if c.Workload == "http" {
		if _, err := c.httpRequest(); err != nil {
			return &UsageError{err.Error()}
		}
	}
	return c.validateTimed()
}

// validateTimed checks the duration-run flags (CONTRACT.md, Duration runs), each error naming
// its flag.
func (c *Config) validateTimed() error {
	switch {
	case c.Duration != 0 && (c.Duration < minDuration || c.Duration > maxDuration):
		return usageErrorf("--duration must be %v..%v, got %v", minDuration, maxDuration, c.Duration)
	case c.Stages != "" && c.Duration != 0:
		return usageErrorf("--stages last their sum: leave --duration out beside them")
	case c.Stages != "" && c.Arrival == "":
		return usageErrorf("--stages ramp an arrival rate: they need --arrival")
	case c.Arrival != "" && !slices.Contains(processes, c.Arrival):
		return usageErrorf("unknown --arrival %q (want one of %v)", c.Arrival, processes)
	case c.Arrival != "" && !c.timed():
		return usageErrorf("--arrival needs --duration or --stages: the span over which tasks arrive")
	case !(c.Rate >= 0 && c.Rate <= maxRate): // NaN too
		return usageErrorf("--rate must be 0..%d, got %v", maxRate, c.Rate)
	case c.Rate != 0 && c.Arrival == "":
		return usageErrorf("--rate is an arrival rate: it needs --arrival")
	case !slices.Contains(onBusyModes, c.OnBusy):
		return usageErrorf("unknown --on-busy %q (want one of %v)", c.OnBusy, onBusyModes)
	case c.OnBusy != defaultOnBusy && c.Arrival == "":
		return usageErrorf("--on-busy applies to arrivals: it needs --arrival")
	case c.MaxLag < minMaxLag || c.MaxLag > maxMaxLag:
		return usageErrorf("--max-lag must be %v..%v, got %v", minMaxLag, maxMaxLag, c.MaxLag)
	case c.MaxLag != defaultMaxLag && c.Arrival == "":
		return usageErrorf("--max-lag bounds the arrival generator's lag: it needs --arrival")
	case c.Seed > maxSeed:
		return usageErrorf("--seed must be 0..%d, got %d", uint64(maxSeed), c.Seed)
	case c.Seed != defaultSeed && c.Arrival == "":
		return usageErrorf("--seed draws arrivals: it needs --arrival")
	case c.Warmup < 0 || c.Warmup > maxWarmup:
		return usageErrorf("--warmup must be 0s..%v, got %v", maxWarmup, c.Warmup)
	case c.Warmup != 0 && !c.timed():
		return usageErrorf("--warmup applies to duration runs (--duration or --stages)")
	case c.closedLoop() && c.Workers == 0:
		return usageErrorf("--workers 0 is one worker per task: a closed loop for --duration needs --workers W")
	}
	if !c.timed() {
		return nil
	}
	if c.Stages != "" {
		stages, err := parseStages(c.Stages)
		if err != nil {
			return usageErrorf("--stages: %v", err)
		}
		if len(stages) > maxStages {
			return usageErrorf("--stages: %d stages, want 1..%d", len(stages), maxStages)
		}
		var sum time.Duration
		for i, s := range stages {
			if s.d < 0 || s.d > maxStageTime {
				return usageErrorf("--stages: stage %d lasts %v, want 0s..%v", i+1, s.d, maxStageTime)
			}
			if !(s.target >= 0 && s.target <= maxRate) {
				return usageErrorf("--stages: stage %d's rate must be 0..%d, got %v", i+1, maxRate, s.target)
			}
			sum += s.d
		}
		if sum < minDuration || sum > maxDuration {
			return usageErrorf("--stages last %v in all, want %v..%v", sum, minDuration, maxDuration)
		}
	}
	if run := c.runTime(); c.Warmup >= run {
		return usageErrorf("--warmup %v must be less than the run (%v)", c.Warmup, run)
	}
	if c.Arrival != "" {
		if n := c.profile().expected(); !(n >= 1 && n <= maxTasks) {
			return usageErrorf("--rate and --duration (or --stages) give %.6g expected arrivals, want 1..%d", n, maxTasks)
		}
	}
	return nil
}

// describe says what the trial runs, for the log.
func (c *Config) describe() string {
	switch {
	case c.Arrival != "":
		return fmt.Sprintf("%d %s arrivals (%s, on busy %s) over %v", c.Tasks, c.Workload, c.Arrival, c.OnBusy, c.runTime())
	case c.closedLoop():
		return fmt.Sprintf("a closed loop of %s tasks for %v", c.Workload, c.Duration)
	}
	return fmt.Sprintf("%d %s tasks", c.Tasks, c.Workload)
}

// timed: a duration run (--duration or --stages), not a count of tasks.
func (c *Config) timed() bool { return c.Duration > 0 || c.Stages != "" }

// closedLoop: a closed loop for a duration, --workers each starting their next task at once.
func (c *Config) closedLoop() bool { return c.Duration > 0 && c.Arrival == "" }

// runTime is a duration run's length: --duration, or the stages' sum.
func (c *Config) runTime() time.Duration {
	run := c.Duration
	for _, s := range c.stages() {
		run += s.d
	}
	return run
}

// profile is an arrival run's rate r(t).
func (c *Config) profile() rateProfile { return newRateProfile(c.Rate, c.stages(), c.Duration) }

// stages are --stages, which validate has parsed already.
func (c *Config) stages() []stage {
	if c.Stages == "" {
		return nil
	}
	stages, err := parseStages(c.Stages)
	if err != nil {
		panic(fmt.Sprintf("--stages %q passed validation: %v", c.Stages, err))
	}
	return stages
}

// ResolvedWorkers is the number of workers actually run: one per task (arrival) for 0, and
// never more workers than tasks, but at least one; a closed loop for a duration has its
// --workers, its tasks being an output.
func (c *Config) ResolvedWorkers() int {
	switch {
	case c.closedLoop():
		return c.Workers
	case c.Workers == 0 || c.Workers > c.Tasks:
		return max(c.Tasks, 1) // an arrival run may draw no arrival
	}
	return c.Workers
}

// taskURL is the target with rtt=<rtt> set in its query, other parameters kept.
func taskURL(target string, rtt time.Duration) (string, error) {
	u, err := checkTarget(target)
	if err != nil {
		return "", err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", err
	}
	q.Set("rtt", rtt.String())
	u.RawQuery = q.Encode()
	return u.String(), nil
}
