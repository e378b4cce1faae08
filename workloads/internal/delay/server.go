package delay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"cxlab.dev/workloads/internal/rlimit"
)

// NewServer returns the HTTP server for h, shaped for many long-lived
// connections: timeouts guard against clients that never send or never
// read, but none of them runs during a delay.
func NewServer(h http.Handler, logger *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,  // request headers must arrive
		IdleTimeout:       120 * time.Second, // a kept connection between requests
		MaxHeaderBytes:    16 << 10,          // requests here are tiny
		ErrorLog:          logger,
	}
}

// Config is the command line of cxlab-delay.
type Config struct {
	Listen        string
	RTT           time.Duration
	ResponseBytes int
	MetricsPort   int
	Stall         Stall
}

// ParseFlags reads cxlab-delay's flags.
func ParseFlags(args []string, output io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("cxlab-delay", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.Listen, "listen", ":8080", "address to serve on")
	fs.DurationVar(&c.RTT, "rtt", 100*time.Millisecond, "delay when the request has no ?rtt=")
	fs.IntVar(&c.ResponseBytes, "response-bytes", 64, "body size when the request has no ?bytes=")
	fs.IntVar(&c.MetricsPort, "metrics-port", 0, "serve Prometheus metrics on 0.0.0.0:P/metrics; 0 = none")
	fs.DurationVar(&c.Stall.Every, "stall-every", 0, "stall every P of Unix time (?stallEvery= overrides); 0 = never")
	fs.DurationVar(&c.Stall.For, "stall-for", 0, "hold every answer due in the first S of each period until it ends (?stallFor= overrides)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case c.RTT < 0:
		return c, fmt.Errorf("--rtt must not be negative, got %v", c.RTT)
	case c.ResponseBytes < 0 || c.ResponseBytes > MaxResponseBytes:
		return c, fmt.Errorf("--response-bytes must be 0..%d, got %d", MaxResponseBytes, c.ResponseBytes)
	case c.MetricsPort < 0 || c.MetricsPort > 65535:
		return c, fmt.Errorf("--metrics-port must be 0..65535, got %d", c.MetricsPort)
	}
	if err := c.Stall.Check(); err != nil {
		return c, fmt.Errorf("--stall-every and --stall-for: %v", err)
	}
	return c, nil
}

// shutdownGrace is how long SIGTERM waits for delayed requests to finish.
const shutdownGrace = 30 * time.Second

// Main is cxlab-delay: it serves until SIGINT or SIGTERM and returns the
// exit status (2 for bad flags).
func Main(args []string, stderr io.Writer) int {
	logger := log.New(stderr, "cxlab-delay: ", 0)
	c, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		logger.Print(err)
		return 2
	}
	if n, err := rlimit.RaiseNoFile(); err != nil {
		logger.Printf("raising the open-files limit: %v; limit is %d connections at most", err, n)
	} else {
		logger.Printf("open-files limit %d", n)
	}

	reg := prometheus.NewRegistry()
	h, err := NewHandler(c.RTT, c.ResponseBytes, c.Stall, reg)
	if err != nil {
		logger.Print(err)
		return 1
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		logger.Print(err)
		return 1
	}
	srv := NewServer(h, logger)
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	logger.Printf("listening on %s, rtt %v, %d response bytes, stalling for %v every %v", ln.Addr(), c.RTT, c.ResponseBytes, c.Stall.For, c.Stall.Every)

	if c.MetricsPort != 0 {
		mln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", c.MetricsPort))
		if err != nil {
			logger.Print(err)
			return 1
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: logger}))
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, msrv)
		go func() { errc <- msrv.Serve(mln) }()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	status := 0
	select {
	case <-ctx.Done():
		logger.Print("shutting down")
	case err := <-errc:
		logger.Print(err)
		status = 1
	}
	// Let delayed requests finish, up to a bound.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			logger.Printf("shutdown: %v", err)
			s.Close()
		}
	}
	logger.Print("stopped")
	return status
}
