package delay

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTarget(t *testing.T, rtt time.Duration) (*httptest.Server, *Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := NewHandler(rtt, 64, Stall{}, reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h, reg
}

// get returns the status, body length and how long the request took.
func get(t *testing.T, url string) (int, int, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, len(b), time.Since(start)
}

func TestDelayIsHonoured(t *testing.T) {
	srv, h, reg := newTarget(t, 80*time.Millisecond)
	for _, c := range []struct {
		query string
		delay time.Duration
		bytes int
	}{
		{"", 80 * time.Millisecond, 64},
		{"?rtt=150ms", 150 * time.Millisecond, 64},
		{"?rtt=0.05&bytes=1000", 50 * time.Millisecond, 1000}, // bare seconds
		{"?bytes=100000&rtt=10ms", 10 * time.Millisecond, 100000},
		{"?rtt=0s&bytes=0", 0, 0},
	} {
		status, n, took := get(t, srv.URL+"/any/path"+c.query)
		if status != http.StatusOK || n != c.bytes || took < c.delay {
			t.Errorf("%q: status %d, %d bytes after %v; want 200, %d bytes after at least %v",
				c.query, status, n, took, c.bytes, c.delay)
		}
	}
	if got := testutil.ToFloat64(h.requests); got != 5 {
		t.Errorf("requests_total %v, want 5", got)
	}
	if got := testutil.ToFloat64(h.inFlight); got != 0 {
		t.Errorf("in_flight %v after all answered", got)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestHealthzAnswersAtOnce(t *testing.T) {
	srv, _, _ := newTarget(t, time.Hour)
	status, _, took := get(t, srv.URL+"/healthz")
	if status != http.StatusOK || took > 30*time.Second { // sanity: far below the hour
		t.Errorf("status %d after %v", status, took)
	}
}

func TestBadParameters(t *testing.T) {
	srv, _, _ := newTarget(t, 0)
	for _, q := range []string{"?rtt=soon", "?rtt=-1s", "?bytes=-1", "?bytes=lots", "?bytes=10485761", "?rtt=NaN", "?a=%zz"} {
		if status, _, _ := get(t, srv.URL+"/"+q); status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, status)
		}
	}
	if status, n, _ := get(t, srv.URL+"/?bytes=10485760"); status != http.StatusOK || n != MaxResponseBytes {
		t.Errorf("largest body: status %d, %d bytes", status, n)
	}
}

func TestParseDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"250ms": 250 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "0": 0, "0.25": 250 * time.Millisecond, "2": 2 * time.Second,
	} {
		if got, err := ParseDelay(in); err != nil || got != want {
			t.Errorf("ParseDelay(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1ms", "-0.5", "Inf", "1e300"} {
		if _, err := ParseDelay(in); err == nil {
			t.Errorf("ParseDelay(%q) accepted", in)
		}
	}
}

// The real server keeps connections alive, serves requests concurrently, and
// none of its timeouts cuts a delay short.
func TestServerKeepsAliveAndOverlaps(t *testing.T) {
	h, err := NewHandler(0, 64, Stall{}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, log.New(io.Discard, "", 0))
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	base := "http://" + ln.Addr().String() + "/?rtt=200ms"

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 50}}
	reused := 0
	for range 2 {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if reused != 1 {
		t.Errorf("second request reused no connection")
	}

	// 50 overlapping requests take about one delay, not fifty.
	start := time.Now()
	done := make(chan error, 50)
	for range 50 {
		go func() {
			resp, err := client.Get(base)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
	}
	for range 50 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second { // upper bound: sanity only
		t.Errorf("50 concurrent 200ms requests took %v", took)
	}
}

func TestMainRejectsBadFlags(t *testing.T) {
	for _, args := range []string{"--rtt -1s", "--response-bytes -1", "--metrics-port 70000", "--bogus", "extra",
		"--stall-every 1s --stall-for 1s", "--stall-for 1s", "--stall-every 61m --stall-for 1s", "--stall-every 1s --stall-for -1ms"} {
		var stderr strings.Builder
		if got := Main(strings.Fields(args), &stderr); got != 2 {
			t.Errorf("%q: exit %d, want 2", args, got)
		}
	}
}

// Stalls are the first S of every P of Unix time: an answer due inside one waits for its end.
func TestStallWindows(t *testing.T) {
	s := Stall{Every: 10 * time.Second, For: 2 * time.Second}
	for at, want := range map[time.Duration]time.Duration{
		100 * time.Second:         2 * time.Second, // a window's start
		101500 * time.Millisecond: 500 * time.Millisecond,
		102 * time.Second:         0, // its end: out
		109999 * time.Millisecond: 0,
		110 * time.Second:         2 * time.Second,
	} {
		if got := s.left(time.Unix(0, int64(at))); got != want {
			t.Errorf("at %v: held %v, want %v", at, got, want)
		}
	}
	if got := (Stall{}).left(time.Unix(100, 0)); got != 0 {
		t.Errorf("no stall held an answer %v", got)
	}
	for _, bad := range []Stall{{Every: time.Second, For: time.Second}, {For: time.Second}, {Every: 61 * time.Minute, For: time.Second}, {Every: time.Second, For: -1}} {
		if bad.Check() == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, err := NewHandler(0, 64, bad, prometheus.NewRegistry()); err == nil {
			t.Errorf("a handler with %+v", bad)
		}
		args := []string{"--stall-every", bad.Every.String(), "--stall-for", bad.For.String()}
		if _, err := ParseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if c, err := ParseFlags(strings.Fields("--stall-every 10m --stall-for 2m"), io.Discard); err != nil ||
		c.Stall != (Stall{Every: 10 * time.Minute, For: 2 * time.Minute}) {
		t.Errorf("--stall-every 10m --stall-for 2m: %+v, %v", c.Stall, err)
	}
}

// untilPhase sleeps until Unix time is at least from into a period of every (and before to).
func untilPhase(every, from, to time.Duration) {
	for {
		into := time.Duration(time.Now().UnixNano() % int64(every))
		if into >= from && into < to {
			return
		}
		time.Sleep((from - into + every) % every)
	}
}

// An answer due in a stall goes out when it ends; one due outside goes out at once; the query
// overrides the flags.
func TestStallHoldsAnswers(t *testing.T) {
	const every, length = 400 * time.Millisecond, 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	h, err := NewHandler(0, 64, Stall{Every: every, For: length}, reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get(t, srv.URL+"/?rtt=0s") // a first connection, out of the timings

	untilPhase(every, 20*time.Millisecond, 60*time.Millisecond)
	_, _, took := get(t, srv.URL+"/")
	into := time.Duration(time.Now().UnixNano() % int64(every))
	if took < length-60*time.Millisecond || into < length {
		t.Errorf("asked at 20-60ms into a stall of 200ms: answered after %v, %v into the period", took, into)
	}
	untilPhase(every, 250*time.Millisecond, 300*time.Millisecond)
	if _, _, took := get(t, srv.URL+"/"); took > 100*time.Millisecond {
		t.Errorf("asked outside the stall: answered after %v", took)
	}
	untilPhase(every, 20*time.Millisecond, 60*time.Millisecond)
	if _, _, took := get(t, srv.URL+"/?stallFor=0s"); took > 100*time.Millisecond {
		t.Errorf("?stallFor=0s: answered after %v, want at once", took)
	}
	// ?stallEvery and ?stallFor make their own stalls: the first 300ms of every second.
	untilPhase(time.Second, 0, 100*time.Millisecond)
	if _, _, took := get(t, srv.URL+"/?stallEvery=1s&stallFor=0.3"); took < 150*time.Millisecond {
		t.Errorf("?stallEvery=1s&stallFor=0.3 asked in the first 100ms: answered after %v", took)
	}
	for _, q := range []string{"?stallFor=400ms", "?stallEvery=100ms", "?stallEvery=2h", "?stallFor=-1s", "?stallEvery=soon"} {
		if status, _, _ := get(t, srv.URL+"/"+q); status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, status)
		}
	}
}
