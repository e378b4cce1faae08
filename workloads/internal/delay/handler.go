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

// MaxStall bounds --stall-every and --stall-for (and their query parameters).
const MaxStall = time.Hour

// Stall makes the target stop now and then, to show coordinated omission (CONTRACT.md): an
// answer due within the first For of every Every of Unix time, [kP, kP+S), is held until that
// window ends. Every target and client agrees on the windows, being on the same clock. The
// zero Stall never stalls.
type Stall struct {
	Every, For time.Duration
}

// Check refuses a stall the contract does not allow: both 0s..1h, For less than Every.
func (s Stall) Check() error {
	switch {
	case s.Every < 0 || s.Every > MaxStall || s.For < 0 || s.For > MaxStall:
		return fmt.Errorf("a stall's period and length must be 0s..%v, got every %v for %v", MaxStall, s.Every, s.For)
	case s.For > 0 && s.For >= s.Every:
		return fmt.Errorf("a stall must be shorter than its period, got %v every %v", s.For, s.Every)
	}
	return nil
}

// left is how long an answer due at now waits for the stall it falls in, 0 outside one.
func (s Stall) left(now time.Time) time.Duration {
	if s.For <= 0 {
		return 0
	}
	if into := time.Duration(now.UnixNano() % int64(s.Every)); into < s.For {
		return s.For - into
	}
	return 0
}

// Handler delays each request by its rtt and answers with a body of its
// size, held through a stall. GET /healthz answers at once.
type Handler struct {
	rtt      time.Duration
	bytes    int
	stall    Stall
	requests prometheus.Counter
	inFlight prometheus.Gauge
}

// NewHandler returns a handler with the given defaults, its metrics
// registered on reg.
func NewHandler(rtt time.Duration, bytes int, stall Stall, reg prometheus.Registerer) (*Handler, error) {
	if err := stall.Check(); err != nil {
		return nil, err
	}
	h := &Handler{
		rtt:   rtt,
		bytes: bytes,
		stall: stall,
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

	delay, size, stall, err := h.params(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(delay + stall.For + writeGrace))
	if !wait(r, delay) || !wait(r, stall.left(time.Now())) {
		return
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

// wait sleeps for d; false if the client left first (the connection is then freed at once).
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// params reads ?rtt=, ?bytes=, ?stallEvery= and ?stallFor=, falling back to the defaults.
func (h *Handler) params(rawQuery string) (time.Duration, int, Stall, error) {
	delay, size, stall := h.rtt, h.bytes, h.stall
	if rawQuery == "" {
		return delay, size, stall, nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, 0, Stall{}, fmt.Errorf("bad query: %v", err)
	}
	for _, p := range []struct {
		name string
		into *time.Duration
	}{{"rtt", &delay}, {"stallEvery", &stall.Every}, {"stallFor", &stall.For}} {
		if s := q.Get(p.name); s != "" {
			if *p.into, err = ParseDelay(s); err != nil {
				return 0, 0, Stall{}, fmt.Errorf("%s: %v", p.name, err)
			}
		}
	}
	if s := q.Get("bytes"); s != "" {
		if size, err = strconv.Atoi(s); err != nil || size < 0 || size > MaxResponseBytes {
			return 0, 0, Stall{}, fmt.Errorf("bytes must be an integer 0..%d, got %q", MaxResponseBytes, s)
		}
	}
	if err := stall.Check(); err != nil {
		return 0, 0, Stall{}, fmt.Errorf("stallEvery and stallFor: %v", err)
	}
	return delay, size, stall, nil
}

// ParseDelay reads a Go duration ("250ms"); a bare number is taken as
// seconds, for clients that do not speak Go durations.
func ParseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("want a duration such as 250ms, got %q", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	return d, nil
}
