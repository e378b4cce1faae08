// Package delay is the HTTP delay target of CONTRACT.md: it answers every
// request after a delay, so a client's concurrency is measured against a
// known round-trip time.
package delay

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxResponseBytes caps ?bytes= so one request cannot make the target
// stream without bound.
const MaxResponseBytes = 10 << 20

// writeGrace is how long a response may take to write once its delay is
// over; it replaces a server-wide WriteTimeout, which would count the delay.
const writeGrace = 30 * time.Second

// filler is the body source, shared and read-only.
var filler = func() []byte {
	b := make([]byte, 32<<10)
	for i := range b {
		b[i] = 'x'
	}
	return b
}()

// Handler delays each request by its rtt and answers with a body of its
// size. GET /healthz answers at once.
type Handler struct {
	rtt      time.Duration
	bytes    int
	requests prometheus.Counter
	inFlight prometheus.Gauge
}

// NewHandler returns a handler with the given defaults, its metrics
// registered on reg.
func NewHandler(rtt time.Duration, bytes int, reg prometheus.Registerer) (*Handler, error) {
	h := &Handler{
		rtt:   rtt,
		bytes: bytes,
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cxlab_delay_requests_total",
			Help: "Delayed requests received.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cxlab_delay_in_flight",
			Help: "Requests being delayed or answered now.",
		}),
	}
	for _, c := range []prometheus.Collector{h.requests, h.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	h.requests.Inc()
	h.inFlight.Inc()
	defer h.inFlight.Dec()

	delay, size, err := h.params(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(delay + writeGrace))
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client left: free the connection now
			t.Stop()
			return
		}
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream") // set, so nothing sniffs the body
	hdr.Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(http.StatusOK)
	for size > 0 {
		n, err := w.Write(filler[:min(size, len(filler))])
		if err != nil {
			return
		}
		size -= n
	}
}

// params reads ?rtt= and ?bytes=, falling back to the defaults.
func (h *Handler) params(rawQuery string) (time.Duration, int, error) {
	delay, size := h.rtt, h.bytes
	if rawQuery == "" {
		return delay, size, nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, 0, fmt.Errorf("bad query: %v", err)
	}
	if s := q.Get("rtt"); s != "" {
		if delay, err = ParseDelay(s); err != nil {
			return 0, 0, err
		}
	}
	if s := q.Get("bytes"); s != "" {
		if size, err = strconv.Atoi(s); err != nil || size < 0 || size > MaxResponseBytes {
			return 0, 0, fmt.Errorf("bytes must be an integer 0..%d, got %q", MaxResponseBytes, s)
		}
	}
	return delay, size, nil
}

// ParseDelay reads a Go duration ("250ms"); a bare number is taken as
// seconds, for clients that do not speak Go durations.
func ParseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("rtt must be a duration such as 250ms, got %q", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("rtt must not be negative, got %q", s)
	}
	return d, nil
}
