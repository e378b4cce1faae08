// Package delay is the HTTP delay target of CONTRACT.md: it answers every
// request after a delay, so a client's concurrency is measured against a
// known round-trip time. It also serves as a small HTTP service of cxlab's own,
// to stand for a user's service in tests:
//
//   - it takes any method; a request's body (POST, PUT...) is read whole and
//     discarded before the delay;
//   - ?status=NNN (200-599) answers with that status after the delay, with the
//     body it would send otherwise (none where the status allows none: 204,
//     304); any other value is answered 400 with a message. A 1xx status is
//     refused too: in HTTP/1.1 it is an interim answer, never the final one;
//   - with RequireHeader (cxlab-delay --require-header NAME, the value from the
//     environment variable CXLAB_DELAY_REQUIRED_VALUE), every request but
//     GET /healthz must carry header NAME with exactly that value, or it is
//     answered 401 at once.
package delay

import (
	"crypto/subtle"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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

// Handler delays each request by its rtt and answers with its status (200
// unless ?status=) and a body of its size, held through a stall. GET /healthz
// answers at once.
type Handler struct {
	rtt      time.Duration
	bytes    int
	stall    Stall
	requests prometheus.Counter
	inFlight prometheus.Gauge
	// A header every request but GET /healthz must carry, with this value; none
	// when the name is empty. The value is a secret: never logged.
	required      string
	requiredValue []byte
}

// The statuses ?status= may ask for: final ones only (a 1xx is interim).
const (
	minStatus = 200
	maxStatus = 599
)

// RequireHeader makes every request but GET /healthz carry header name with
// exactly value, else it is answered 401 at once. Call it before serving.
func (h *Handler) RequireHeader(name, value string) error {
	if err := CheckRequiredHeader(name, value); err != nil {
		return err
	}
	h.required, h.requiredValue = name, []byte(value)
	return nil
}

// CheckRequiredHeader refuses a name that is no RFC 9110 token and a value no
// client could send (empty, or holding a control character); no message holds
// the value.
func CheckRequiredHeader(name, value string) error {
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fmt.Errorf("the header name %q is not an RFC 9110 token", name)
	}
	if value == "" {
		return fmt.Errorf("the required value is empty")
	}
	if strings.IndexFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) >= 0 {
		return fmt.Errorf("the required value holds a control character")
	}
	return nil
}

func isTokenChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// authorized: no header is required, or the request carries it with the value
// (compared in constant time).
func (h *Handler) authorized(r *http.Request) bool {
	if h.required == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(r.Header.Get(h.required)), h.requiredValue) == 1
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
	if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	h.requests.Inc()
	h.inFlight.Inc()
	defer h.inFlight.Dec()

	if !h.authorized(r) {
		http.Error(w, fmt.Sprintf("this target requires the header %s", h.required), http.StatusUnauthorized)
		return
	}
	a, err := h.params(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The whole request is read before the delay, whatever its method.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.delay + a.stall.For + writeGrace))
	if !wait(r, a.delay) || !wait(r, a.stall.left(time.Now())) {
		return
	}
	if !bodyAllowed(a.status) {
		w.WriteHeader(a.status)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream") // set, so nothing sniffs the body
	hdr.Set("Content-Length", strconv.Itoa(a.size))
	w.WriteHeader(a.status)
	size := a.size
	for size > 0 {
		n, err := w.Write(filler[:min(size, len(filler))])
		if err != nil {
			return
		}
		size -= n
	}
}

// bodyAllowed: a final status that may carry a body (RFC 9110: not 204 or 304).
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
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

// answer is what a request asks for: its delay, body size, stall and status.
type answer struct {
	delay  time.Duration
	size   int
	stall  Stall
	status int
}

// params reads ?rtt=, ?bytes=, ?stallEvery=, ?stallFor= and ?status=, falling back to the
// defaults (and 200).
func (h *Handler) params(rawQuery string) (answer, error) {
	a := answer{delay: h.rtt, size: h.bytes, stall: h.stall, status: http.StatusOK}
	if rawQuery == "" {
		return a, nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return answer{}, fmt.Errorf("bad query: %v", err)
	}
	for _, p := range []struct {
		name string
		into *time.Duration
	}{{"rtt", &a.delay}, {"stallEvery", &a.stall.Every}, {"stallFor", &a.stall.For}} {
		if s := q.Get(p.name); s != "" {
			if *p.into, err = ParseDelay(s); err != nil {
				return answer{}, fmt.Errorf("%s: %v", p.name, err)
			}
		}
	}
	if s := q.Get("bytes"); s != "" {
		if a.size, err = strconv.Atoi(s); err != nil || a.size < 0 || a.size > MaxResponseBytes {
			return answer{}, fmt.Errorf("bytes must be an integer 0..%d, got %q", MaxResponseBytes, s)
		}
	}
	if err := a.stall.Check(); err != nil {
		return answer{}, fmt.Errorf("stallEvery and stallFor: %v", err)
	}
	if s := q.Get("status"); s != "" {
		if a.status, err = strconv.Atoi(s); err != nil || a.status < minStatus || a.status > maxStatus {
			return answer{}, fmt.Errorf("status must be a final HTTP status %d..%d (a 1xx answer is only interim), got %q",
				minStatus, maxStatus, s)
		}
	}
	return a, nil
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
