package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"cxlab.dev/workloads/internal/metrics"
	"cxlab.dev/workloads/internal/rlimit"
)

// Exit statuses from the contract.
const (
	ExitOK    = 0
	ExitCrash = 1
	ExitUsage = 2
)

// Main is cxlab-runner-go: it runs one trial as the flags in args describe,
// writes the Result to stdout (and --result-path) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) (status int) {
	logger := log.New(stderr, "cxlab-runner-go: ", 0)
	c, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		logger.Print(err)
		return ExitUsage
	}
	defer func() {
		if p := recover(); p != nil {
			crash(p)
		}
	}()

	if n, err := rlimit.RaiseNoFile(); err != nil {
		logger.Printf("raising the open-files limit: %v (soft limit %d)", err, n)
	} else {
		logger.Printf("open-files limit %d", n)
	}
	if c.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(c.GOMAXPROCS)
	}

	// An arrival run's tasks are its scheduled arrivals, drawn here, before the start barrier
	// and unmeasured: the metrics plan them and the workers resolve against them.
	var schedule []time.Duration
	var rate func(time.Duration) float64
	if c.Arrival != "" {
		profile := c.profile()
		schedule = profile.schedule(c.Arrival, c.Seed)
		c.Tasks = len(schedule)
		rate = func(elapsed time.Duration) float64 { return profile.rateAt(elapsed.Seconds()) }
	}

	reg := prometheus.NewRegistry()
	trial, err := metrics.NewTrial(reg, metrics.Info{
		Experiment: c.Experiment,
		Trial:      c.Trial,
		Pod:        strconv.Itoa(c.Pod),
		Model:      c.Model,
		Workload:   c.Workload,
		Workers:    c.ResolvedWorkers(),
		GOMAXPROCS: strconv.Itoa(runtime.GOMAXPROCS(0)),
		Runtime:    runtime.Version(),
		Tasks:      c.Tasks,
		Rate:       rate,
	})
	if err != nil {
		logger.Printf("registering metrics: %v", err)
		return ExitCrash
	}
	barrier := newStartBarrier(c.BarrierTimeout)
	end := newEndOfTasks()
	if c.MetricsPort != 0 {
		srv, err := serveMetrics(reg, barrier, end, c.MetricsPort, logger)
		if err != nil {
			logger.Print(err)
			return ExitCrash
		}
		defer closeGently(srv)
	}

	logger.Printf("running %s with %d workers, GOMAXPROCS %d", c.describe(), c.ResolvedWorkers(), runtime.GOMAXPROCS(0))
	stopOnSIGTERM := exitOnSIGTERM(logger)
	result, err := Run(&c, schedule, trial, barrier)
	// From here a SIGTERM only ends the linger: registered before the task-phase handler is
	// let go, so no signal between the two meets the default action (death by signal).
	done, stopDone := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopDone()
	stopOnSIGTERM()
	if errors.Is(err, errNotReleased) {
		logger.Print(err)
		return ExitNotReleased
	}
	if err != nil {
		logger.Print(err)
		return ExitCrash
	}
	written, err := writeResult(result, stdout, c.ResultPath, logger)
	if err != nil {
		logger.Print(err)
		return ExitCrash
	}
	logger.Printf("done: %d ok, %d failed in %.3fs", result.TasksOK, result.TasksFailed, result.WallSeconds)

	end.finish(written)
	if end.afterTasks(done, c.Linger, c.FinalRead) {
		logger.Printf("no final read of /metrics within %v", c.FinalRead)
	}
	return ExitOK
}

func serveMetrics(reg *prometheus.Registry, barrier *startBarrier, end *endOfTasks, port int, logger *log.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	mux := http.NewServeMux()
	end.handle(mux, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: logger}))
	barrier.handle(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Printf("metrics endpoint: %v", err)
		}
	}()
	return srv, nil
}

// writeResult writes the same bytes to stdout and, if given, to path, and returns them
// (what GET /result answers).
func writeResult(r Result, stdout io.Writer, path string, logger *log.Logger) ([]byte, error) {
	b, err := r.Encode()
	if err != nil {
		return nil, fmt.Errorf("encoding the Result: %w", err)
	}
	if len(b) > MaxResultBytes {
		// Only huge --experiment/--trial labels get here; a whole Result
		// on stdout is still worth more than none.
		logger.Printf("warning: the Result is %d bytes, over %d", len(b), MaxResultBytes)
	}
	if _, err := stdout.Write(b); err != nil {
		return nil, fmt.Errorf("writing the Result: %w", err)
	}
	if path != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, fmt.Errorf("writing the Result: %w", err)
		}
	}
	return b, nil
}

// exitOnSIGTERM ends a trial that is stopped (a deleted Pod) at once, saying so, with status
// 128+15 as the Python runner does. As PID 1 in a container the Go runtime's own handling
// cannot kill the process with the signal and falls back to exit status 2, the usage error.
// The returned func hands SIGTERM back (to linger) once the tasks are done.
func exitOnSIGTERM(logger *log.Logger) (stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-signals:
			logger.Print("stopped by SIGTERM")
			os.Exit(128 + int(syscall.SIGTERM))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
	}
}

// closeGently lets an answer being written finish (the final read ends the runner from inside
// its handler) before the endpoint closes; at most a second.
func closeGently(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
}
