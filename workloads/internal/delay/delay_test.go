package delay

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
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

// do sends method to url with body and headers, and returns the status, the body's length and
// how long it took.
func do(t *testing.T, method, url, body string, header http.Header) (int, int, time.Duration) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range header {
		req.Header[name] = values
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
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

// ?status=NNN answers with that status after the delay, with the body it would send otherwise
// (none for 204 and 304); any method is taken, a body read and discarded, every request
// counted.
func TestStatusAndAnyMethod(t *testing.T) {
	srv, h, _ := newTarget(t, 50*time.Millisecond)
	for _, c := range []struct {
		method, query, body string
		status, bytes       int
	}{
		{"GET", "?status=503", "", 503, 64},
		{"GET", "?status=404&bytes=10&rtt=60ms", "", 404, 10},
		{"GET", "?status=200", "", 200, 64},
		{"GET", "?status=599", "", 599, 64},
		{"GET", "?status=204", "", 204, 0},
		{"GET", "?status=304", "", 304, 0},
		{"HEAD", "?status=500", "", 500, 0},
		{"POST", "", strings.Repeat("p", 100000), 200, 64},
		{"PUT", "?status=201&bytes=3", `{"a":1}`, 201, 3},
		{"PATCH", "", "x", 200, 64},
		{"DELETE", "?status=202", "", 202, 64},
		{"OPTIONS", "", "", 200, 64},
	} {
		status, n, took := do(t, c.method, srv.URL+"/svc"+c.query, c.body, nil)
		if status != c.status || n != c.bytes || took < 50*time.Millisecond {
			t.Errorf("%s %q: status %d, %d bytes after %v; want %d, %d bytes after the delay",
				c.method, c.query, status, n, took, c.status, c.bytes)
		}
	}
	if got := testutil.ToFloat64(h.requests); got != 12 {
		t.Errorf("requests_total %v, want 12", got)
	}
	for _, q := range []string{"?status=99", "?status=100", "?status=101", "?status=199", "?status=600", "?status=2xx", "?status=-200", "?status=2e2"} {
		status, _, took := do(t, "GET", srv.URL+"/"+q, "", nil)
		if status != http.StatusBadRequest || took > 40*time.Millisecond {
			t.Errorf("%s: status %d after %v, want 400 at once", q, status, took)
		}
	}
}

// With a required header every request but GET /healthz must carry it with the value, or is
// answered 401 at once.
func TestRequiredHeader(t *testing.T) {
	srv, h, _ := newTarget(t, 200*time.Millisecond)
	if err := h.RequireHeader("X-Cxlab-Token", "s3cret value"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		header       http.Header
		status       int
	}{
		{"GET", "/", nil, 401},
		{"POST", "/?status=500", http.Header{"X-Cxlab-Token": {"wrong"}}, 401},
		{"GET", "/", http.Header{"X-Cxlab-Token": {"s3cret valu"}}, 401},
		{"GET", "/", http.Header{"X-Other": {"s3cret value"}}, 401},
		{"POST", "/healthz", nil, 401},
		{"GET", "/healthz", nil, 200},
		{"HEAD", "/healthz", nil, 200},
		{"GET", "/?rtt=0s", http.Header{"X-Cxlab-Token": {"s3cret value"}}, 200},
		{"POST", "/?rtt=0s&status=418", http.Header{"x-cxlab-token": {"s3cret value"}}, 418},
	} {
		status, _, took := do(t, c.method, srv.URL+c.path, "", c.header)
		if status != c.status || took > 150*time.Millisecond {
			t.Errorf("%s %s with %v: status %d after %v, want %d at once", c.method, c.path, c.header, status, took, c.status)
		}
	}
	status, _, took := do(t, "GET", srv.URL+"/", "", http.Header{"X-Cxlab-Token": {"s3cret value"}})
	if status != 200 || took < 200*time.Millisecond {
		t.Errorf("with the header: status %d after %v, want 200 after the delay", status, took)
	}
	for _, bad := range []struct{ name, value string }{{"", "v"}, {"X Token", "v"}, {"X:Token", "v"}, {"X-Token", ""}, {"X-Token", "a\nb"}} {
		if err := h.RequireHeader(bad.name, bad.value); err == nil {
			t.Errorf("RequireHeader(%q, %q) accepted", bad.name, bad.value)
		} else if bad.value != "" && bad.value != "v" && strings.Contains(err.Error(), bad.value) {
			t.Errorf("the message shows the value: %v", err)
		}
	}
}

// --require-header takes its value from CXLAB_DELAY_REQUIRED_VALUE, which must be set; nothing
// shows the value: not a message, not the log's line, not the Config formatted.
func TestRequireHeaderFlag(t *testing.T) {
	const secret = "t0p-s3cret"
	t.Setenv(RequiredValueEnv, " "+secret+" ")
	c, err := ParseFlags(strings.Fields("--require-header X-Token --rtt 1ms"), io.Discard)
	if err != nil || c.RequireHeader != "X-Token" || string(c.RequiredValue) != secret {
		t.Fatalf("got %q, %v", c.RequireHeader, err)
	}
	for _, shown := range []string{c.describe(), fmt.Sprint(c), fmt.Sprintf("%+v %#v %s %q", c, c, c.RequiredValue, c.RequiredValue)} {
		if strings.Contains(shown, secret) || strings.Contains(shown, "s3cret") {
			t.Errorf("the value is shown: %s", shown)
		}
	}
	if !strings.Contains(c.describe(), "X-Token") {
		t.Errorf("the log line does not name the header: %s", c.describe())
	}
	if _, err := ParseFlags([]string{"--require-header", "X Token"}, io.Discard); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("a name that is no token: %v", err)
	}
	t.Setenv(RequiredValueEnv, "a\r\n"+secret)
	if _, err := ParseFlags([]string{"--require-header", "X-Token"}, io.Discard); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("a value with a line break: %v", err)
	}
	for _, set := range []bool{false, true} {
		os.Unsetenv(RequiredValueEnv)
		if set {
			t.Setenv(RequiredValueEnv, "")
		}
		var stderr strings.Builder
		if got := Main([]string{"--require-header", "X-Token", "--listen", "127.0.0.1:0"}, &stderr); got != 2 || !strings.Contains(stderr.String(), RequiredValueEnv) {
			t.Errorf("without the value (set %v): exit %d, %q; want 2 naming %s", set, got, stderr.String(), RequiredValueEnv)
		}
	}
	var help strings.Builder
	if got := Main([]string{"--help"}, &help); got != 0 {
		t.Errorf("--help: exit %d", got)
	}
	for _, want := range []string{"status=NNN", "--require-header NAME", RequiredValueEnv, "-require-header", "401", "any method"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help does not say %q:\n%s", want, help.String())
		}
	}
}

// A request's body is read whole, however large: the connection stays open for the next
// request (net/http would close it after the answer with more than 256 KiB left unread).
func TestABodyIsReadWhole(t *testing.T) {
	h, err := NewHandler(0, 64, Stall{}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	body := strings.Repeat("b", 4<<20)
	for _, method := range []string{"POST", "PUT", "POST"} {
		if status, n, _ := do(t, method, srv.URL+"/?status=201", body, nil); status != 201 || n != 64 {
			t.Errorf("%s of 4 MiB: status %d, %d bytes", method, status, n)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections for 3 requests, want 1: a body was not read whole", got)
	}
}
