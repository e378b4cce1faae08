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
	"os"
	"os/signal"
	"strconv"
	"strings"
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
	RequireHeader string // a header every request but GET /healthz must carry; "" = none
	RequiredValue Secret // its value, from RequiredValueEnv
}

// RequiredValueEnv is the environment variable holding the value --require-header wants, read
// once at start, so the secret is never in the target's arguments.
const RequiredValueEnv = "CXLAB_DELAY_REQUIRED_VALUE"

// Secret is a value never shown: formatted, it reads "(hidden)", so no log line or message
// can hold it by mistake.
type Secret string

func (Secret) String() string               { return "(hidden)" }
func (Secret) GoString() string             { return `"(hidden)"` }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// usage is the --help text's head; the flags follow it.
const usage = `Usage: cxlab-delay [flags]

Answers every HTTP request, of any method, after a delay: --rtt, or the request's ?rtt=.
A request's body (POST, PUT...) is read whole and discarded first. GET /healthz answers at
once. Query parameters, each overriding its flag for one request:

  rtt=D                    the delay: a Go duration (250ms) or seconds (0.25)
  bytes=N                  the answer's body, 0..10485760 bytes (--response-bytes)
  stallEvery=P&stallFor=S  hold every answer due in the first S of every P of Unix time
  status=NNN               answer with this status, 200..599, after the delay (204 and 304
                           without a body); any other value is answered 400 (a 1xx is
                           interim in HTTP/1.1, never a final answer)

With --require-header NAME every request but GET /healthz must carry the header NAME with
the value of the environment variable ` + RequiredValueEnv + ` (read once at start, never
logged; the flag without it set is refused), or it is answered 401 at once.

Flags:
`

// ParseFlags reads cxlab-delay's flags, and with --require-header the value it wants from the
// environment (RequiredValueEnv).
func ParseFlags(args []string, output io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("cxlab-delay", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		_, _ = io.WriteString(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Listen, "listen", ":8080", "address to serve on")
	fs.DurationVar(&c.RTT, "rtt", 100*time.Millisecond, "delay when the request has no ?rtt=")
	fs.IntVar(&c.ResponseBytes, "response-bytes", 64, "body size when the request has no ?bytes=")
	fs.IntVar(&c.MetricsPort, "metrics-port", 0, "serve Prometheus metrics on port P of --listen's host, at /metrics; 0 = none")
	fs.DurationVar(&c.Stall.Every, "stall-every", 0, "stall every P of Unix time (?stallEvery= overrides); 0 = never")
	fs.DurationVar(&c.Stall.For, "stall-for", 0, "hold every answer due in the first S of each period until it ends (?stallFor= overrides)")
	fs.StringVar(&c.RequireHeader, "require-header", "", "every request but GET /healthz must carry header `NAME` with the value of $"+RequiredValueEnv+", else 401")
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
	if c.RequireHeader != "" {
		value, set := os.LookupEnv(RequiredValueEnv)
		c.RequiredValue = Secret(strings.Trim(value, " \t")) // a header's value has no outer blanks
		if !set || c.RequiredValue == "" {
			return c, fmt.Errorf("--require-header %s needs the value in the environment variable %s: unset or empty", c.RequireHeader, RequiredValueEnv)
		}
		if err := CheckRequiredHeader(c.RequireHeader, string(c.RequiredValue)); err != nil {
			return c, fmt.Errorf("--require-header %s (%s): %v", c.RequireHeader, RequiredValueEnv, err)
		}
	}
	return c, nil
}

// describe says how the target answers, for its log: the required header's name, never its
// value.
func (c Config) describe() string {
	s := fmt.Sprintf("rtt %v, %d response bytes, stalling for %v every %v", c.RTT, c.ResponseBytes, c.Stall.For, c.Stall.Every)
	if c.RequireHeader != "" {
		s += fmt.Sprintf(", requiring the header %s (its value from %s) on every request but GET /healthz", c.RequireHeader, RequiredValueEnv)
	}
	return s
}

// metricsAddress is where --metrics-port listens: the host --listen gives (all interfaces for
// ":8080", as there), the port --metrics-port. A target told to listen on one address serves
// its metrics there too, never on every interface.
func (c Config) metricsAddress() (string, error) {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %v", c.Listen, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(c.MetricsPort)), nil
}

func (c Config) listenMetrics() (net.Listener, error) {
	address, err := c.metricsAddress()
	if err != nil {
		return nil, err
	}
	return net.Listen("tcp", address)
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve(ctx, c, logger)
}

// serve runs the target of the flags until ctx ends (then 0) or a server fails (1).
func serve(ctx context.Context, c Config, logger *log.Logger) int {
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
	if c.RequireHeader != "" {
		if err := h.RequireHeader(c.RequireHeader, string(c.RequiredValue)); err != nil {
			logger.Print(err)
			return 1
		}
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
	logger.Printf("listening on %s, %s", ln.Addr(), c.describe())

	if c.MetricsPort != 0 {
		mln, err := c.listenMetrics()
		if err != nil {
			logger.Print(err)
			return 1
		}
		logger.Printf("metrics on %s/metrics", mln.Addr())
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: logger}))
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, msrv)
		go func() { errc <- msrv.Serve(mln) }()
	}

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
