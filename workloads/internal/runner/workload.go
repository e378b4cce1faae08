package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"cxlab.dev/workloads/internal/metrics"
)

// task is one unit of a workload; an error makes it a failed task.
type task func() error

func newTask(c *Config) (task, error) {
	switch c.Workload {
	case "sleep":
		return sleepTask(c.RTT), nil
	case "hold":
		return sleepTask(c.Hold), nil
	case "cpu":
		return cpuTask(c.Iterations), nil
	case "http":
		return httpTask(c)
	}
	return nil, fmt.Errorf("unknown workload %q", c.Workload)
}

func sleepTask(d time.Duration) task {
	return func() error {
		time.Sleep(d)
		return nil
	}
}

// cpuSink receives every count so the compiler cannot drop the loop.
var cpuSink atomic.Uint64

func cpuTask(iterations int) task {
	return func() error {
		cpuSink.Add(count(iterations))
		return nil
	}
}

// count is the pure count loop of the cpu workload. noinline keeps the loop a
// loop whatever the caller knows about n.
//
//go:noinline
func count(n int) uint64 {
	var c uint64
	for range n {
		c++
	}
	return c
}

// httpTimeout bounds a request beyond its rtt, so a dead target fails the
// task instead of hanging the trial (--request-timeout 0s).
const httpTimeout = 2 * time.Minute

// httpTask sends the flags' request (httpRequest) once per task and reads the whole answer;
// a failed task's error carries its kind (classify).
func httpTask(c *Config) (task, error) {
	r, err := c.httpRequest()
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy: nil, // measure the model against the target, never via a proxy
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		// A custom dialler and TLS config keep HTTP/1.1 on https too (no HTTP/2 multiplexing),
		// so that --connection means a connection per worker or per task there as well.
		TLSClientConfig:     r.tls,
		DisableKeepAlives:   c.Connection == "fresh",
		MaxIdleConns:        c.ResolvedWorkers(),
		MaxIdleConnsPerHost: c.ResolvedWorkers(), // one kept connection per worker
		IdleConnTimeout:     90 * time.Second,
		// The contract's one bound on an answer's head (httpResponse.maxHeaderBytes), as the
		// Python models count it: Go's own default is 10 MiB.
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	if c.Connection != "fresh" {
		// Without a cap, a request that finds no idle connection dials a new one even if a
		// connection comes free before the dial ends, and the dialled one then stays beside
		// it in the pool: more connections than workers (docs/benchmarks.md has the runs).
		transport.MaxConnsPerHost = c.ResolvedWorkers()
	}
	// The client's Timeout bounds the whole request, the answer's body read included.
	client := &http.Client{
		Transport: transport,
		Timeout:   r.timeout,
		// One task is one request, as in the Python runners: a redirect is an answer
		// (success only if --ok-status lists it), never a second request.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return func() error { return r.send(client) }, nil
}

// send makes one request and reads its whole answer; the error, if any, is a *taskError.
func (r *httpRequest) send(client *http.Client) error {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body) // a fresh reader each time; sets Content-Length
	}
	var seen requestTrace
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), seen.hooks()),
		r.method, r.url, body)
	if err != nil {
		return &taskError{metrics.FailedOther, err}
	}
	if r.header != nil {
		req.Header = r.header // read only: neither the client nor the transport writes it
	}
	resp, err := client.Do(req)
	if err != nil {
		return &taskError{classify(err, &seen), err}
	}
	defer resp.Body.Close()
	// Read the whole body: it is part of the round trip and lets a kept
	// connection be reused.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return &taskError{classify(err, &seen), err}
	}
	if !r.ok.has(resp.StatusCode) {
		return &taskError{metrics.FailedStatus, fmt.Errorf("HTTP %s", resp.Status)}
	}
	return nil
}

// errorMessage is how a failed task is reported. Socket errors name the
// local port, which differs per connection; it is left out so that one cause
// aggregates into one message.
func errorMessage(err error) string {
	msg := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Source != nil {
		bare := *op
		bare.Source = nil
		return strings.Replace(msg, op.Error(), bare.Error(), 1)
	}
	return msg
}
