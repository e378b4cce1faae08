package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cxlab.dev/workloads/internal/metrics"
)

// httpTrial runs an http trial against target with more flags and returns its Result, whose
// failure kinds must sum to its failed tasks.
func httpTrial(t *testing.T, target string, more ...string) Result {
	t.Helper()
	r, _ := trial(t, append([]string{"--model", "goroutines", "--workload", "http", "--target-url", target}, more...)...)
	if r.FailureKinds == nil {
		t.Fatalf("no failureKinds in the Result")
	}
	if k := r.FailureKinds; k.Connect+k.Timeout+k.TLS+k.Status+k.Other != r.TasksFailed {
		t.Errorf("failure kinds %+v do not sum to the %d failed tasks", *k, r.TasksFailed)
	}
	return r
}

// testService is a test service answering with handler.
func testService(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func answerOK(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// stall answers after d unless the client leaves first.
func stall(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			_, _ = io.WriteString(w, "late")
		case <-r.Context().Done():
		}
	}
}

// cutShort sends the status line, the headers and 10 of the 100 bytes it promises, and hangs up.
func cutShort(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
	_ = buf.Flush()
}

// caFile writes the test server's certificate as PEM to a temporary file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
}

// testCertificate is a self-signed certificate of its own, no test server's.
func testCertificate(t *testing.T) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// tlsService is a test service over TLS with httptest's certificate; the handshakes it refuses
// are not logged.
func tlsService(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// The request carries --method, --body (with its Content-Length, every time), the literal
// headers and the one from the environment; --target-mode delay adds rtt=<rtt> to the query,
// direct sends the URL as given.
func TestTheRequestCarriesTheFlags(t *testing.T) {
	type seen struct {
		method, query, body, auth, literal, agent string
		length                                    int64
	}
	var mu sync.Mutex
	var requests []seen
	srv := testService(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		requests = append(requests, seen{r.Method, r.URL.RawQuery, string(body), r.Header.Get("Authorization"),
			strings.Join(r.Header.Values("X-Literal"), "|"), r.Header.Get("User-Agent"), r.ContentLength})
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	t.Setenv("CXLAB_TEST_TOKEN", "Bearer t0ken")
	for _, c := range []struct {
		flags []string
		want  seen
	}{
		{[]string{"--method", "POST", "--body", `{"n":1}`, "--header", "X-Literal: one", "--header", "x-literal:two",
			"--header-env", "Authorization=CXLAB_TEST_TOKEN", "--header", "User-Agent: cxlab-test"},
			seen{"POST", "a=1&b=2&rtt=5ms", `{"n":1}`, "Bearer t0ken", "one|two", "cxlab-test", 7}},
		{[]string{"--method", "PUT", "--body", "x", "--target-mode", "direct", "--connection", "reuse"},
			seen{"PUT", "b=2&a=1", "x", "", "", "Go-http-client/1.1", 1}},
		{[]string{"--target-mode", "direct"}, seen{"GET", "b=2&a=1", "", "", "", "Go-http-client/1.1", 0}},
		{[]string{"--method", "POST"}, seen{"POST", "a=1&b=2&rtt=5ms", "", "", "", "Go-http-client/1.1", 0}},
	} {
		requests = nil
		r := httpTrial(t, srv.URL+"/p?b=2&a=1", append([]string{"--tasks", "6", "--workers", "2", "--rtt", "5ms"}, c.flags...)...)
		if r.TasksOK != 6 {
			t.Errorf("%v: %d ok of 6: %v", c.flags, r.TasksOK, r.Errors)
		}
		if len(requests) != 6 {
			t.Errorf("%v: the service saw %d requests, want 6", c.flags, len(requests))
		}
		for _, got := range requests {
			if got != c.want {
				t.Errorf("%v: the service saw %+v, want %+v", c.flags, got, c.want)
				break
			}
		}
	}
}

// Each failure gets its kind (CONTRACT.md, Failed tasks and their kinds), the Result's
// failureKinds sum to its failed tasks, and --ok-status decides what a status is.
func TestEachFailureHasItsKind(t *testing.T) {
	closed := testService(t, answerOK)
	refused := closed.URL
	closed.Close() // nothing listens there now

	tlsSrv := tlsService(t, answerOK)
	ca := caFile(t, tlsSrv)
	otherCA := writeFile(t, "other.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCertificate(t).Raw})))

	partial := testService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, "0123456789")
		http.NewResponseController(w).Flush()
		stall(5*time.Second)(w, r) // past the bound; then cut short
	})
	for _, c := range []struct {
		name, url string
		flags     []string
		want      FailureKinds
		message   string
	}{
		{"refused", refused, nil, FailureKinds{Connect: 3}, "connection refused"},
		{"refused, reused", refused, []string{"--connection", "reuse", "--workers", "1"}, FailureKinds{Connect: 3}, "connection refused"},
		{"no answer in time", testService(t, stall(5*time.Second)).URL, []string{"--request-timeout", "100ms"},
			FailureKinds{Timeout: 3}, "Client.Timeout exceeded"},
		{"the body not read in time", partial.URL, []string{"--request-timeout", "200ms"}, FailureKinds{Timeout: 3}, "Client.Timeout"},
		{"500", testService(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }).URL, nil,
			FailureKinds{Status: 3}, "HTTP 500 Internal Server Error"},
		{"500 counted ok", testService(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }).URL,
			[]string{"--ok-status", "200-299,500"}, FailureKinds{}, ""},
		{"200 not counted ok", testService(t, answerOK).URL, []string{"--ok-status", "201-204,304"}, FailureKinds{Status: 3}, "HTTP 200 OK"},
		{"a certificate of no known CA", tlsSrv.URL, nil, FailureKinds{TLS: 3}, "certificate"},
		{"a certificate of another CA", tlsSrv.URL, []string{"--tls-ca", otherCA}, FailureKinds{TLS: 3}, "certificate"},
		{"the certificate's CA", tlsSrv.URL, []string{"--tls-ca", ca}, FailureKinds{}, ""},
		{"the certificate's CA, reused", tlsSrv.URL, []string{"--tls-ca", ca, "--connection", "reuse"}, FailureKinds{}, ""},
		{"no check", tlsSrv.URL, []string{"--insecure-skip-verify"}, FailureKinds{}, ""},
		{"https to plain http", strings.Replace(testService(t, answerOK).URL, "http:", "https:", 1), []string{"--insecure-skip-verify"},
			FailureKinds{TLS: 3}, "HTTPS client"},
		{"cut short", testService(t, cutShort).URL, nil, FailureKinds{Other: 3}, "unexpected EOF"},
		// a redirect is an answer, not a second request (as http.client, the Python runners')
		{"a redirect", testService(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}).URL, nil, FailureKinds{Status: 3}, "HTTP 302 Found"},
		{"a redirect counted ok", testService(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				w.WriteHeader(http.StatusTeapot) // never asked for
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}).URL, []string{"--ok-status", "302"}, FailureKinds{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httpTrial(t, c.url, append([]string{"--tasks", "3", "--rtt", "1ms"}, c.flags...)...)
			if *r.FailureKinds != c.want {
				t.Errorf("failure kinds %+v, want %+v (errors %v)", *r.FailureKinds, c.want, r.Errors)
			}
			if c.message != "" && (len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, c.message)) {
				t.Errorf("errors %v, want one saying %q", r.Errors, c.message)
			}
			if c.want == (FailureKinds{}) && (r.TasksOK != 3 || len(r.Errors) != 0) {
				t.Errorf("%d ok of 3: %v", r.TasksOK, r.Errors)
			}
		})
	}
}

// failEveryOther answers 500 to every other request, 200 to the rest.
func failEveryOther() http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}
}

// Every shape of trial writes failureKinds, summing to its failed tasks: counted, a closed
// loop for a duration, arrivals, a warm-up (whose tasks count in both); a workload that never
// fails writes zeros.
func TestFailureKindsInEveryShape(t *testing.T) {
	for _, flags := range []string{
		"--tasks 10 --workers 3",
		"--tasks 10 --workers 0",
		"--workers 2 --duration 1s",
		"--arrival uniform --rate 20 --duration 1s --workers 2",
		"--arrival poisson --rate 20 --duration 1s --workers 0 --warmup 500ms",
		"--workers 2 --duration 1s --warmup 500ms",
	} {
		t.Run(flags, func(t *testing.T) {
			r := httpTrial(t, testService(t, failEveryOther()).URL, strings.Fields(flags+" --rtt 20ms")...)
			if r.TasksFailed == 0 || r.TasksOK == 0 || *r.FailureKinds != (FailureKinds{Status: r.TasksFailed}) {
				t.Errorf("%d ok, %d failed, kinds %+v", r.TasksOK, r.TasksFailed, *r.FailureKinds)
			}
		})
	}
	r, b := trial(t, strings.Fields("--model goroutines --workload sleep --tasks 3 --rtt 1ms")...)
	if r.FailureKinds == nil || *r.FailureKinds != (FailureKinds{}) || !strings.Contains(string(b), `"failureKinds":{"connect":0,"timeout":0,"tls":0,"status":0,"other":0}`) {
		t.Errorf("sleep: failureKinds %v in %s", r.FailureKinds, b)
	}
}

// cxlab_task_failures_total counts the failed tasks by kind, as the Result does, every kind
// from the start.
func TestTheFailureCounterByKind(t *testing.T) {
	var n atomic.Int64
	srv := testService(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 4 {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			cutShort(w, r)
		case 3:
			stall(time.Hour)(w, r)
		}
	})
	port := freePort(t)
	args := []string{"--model", "goroutines", "--workload", "http", "--target-url", srv.URL, "--tasks", "8", "--workers", "1",
		"--request-timeout", "200ms", "--metrics-port", fmt.Sprint(port), "--barrier-timeout", "30s", "--linger", "1s"}
	var stdout, stderr strings.Builder
	status := make(chan int, 1)
	go func() { status <- Main(args, &stdout, &stderr) }()

	before := waitForMetrics(t, port, `cxlab_tasks_completed_total{outcome="failed"} 0`)
	for _, kind := range metrics.FailureKinds {
		if line := fmt.Sprintf(`cxlab_task_failures_total{kind=%q} 0`, kind); !strings.Contains(before, line+"\n") {
			t.Errorf("before the tasks, the metrics lack %q", line)
		}
	}
	release(t, port)
	scraped := waitForMetrics(t, port, "cxlab_trial_finished 1")
	if got := <-status; got != ExitOK {
		t.Fatalf("exit %d\n%s", got, stderr.String())
	}
	r := decode(t, []byte(stdout.String()))
	if want := (FailureKinds{Timeout: 2, Status: 2, Other: 2}); *r.FailureKinds != want || r.TasksFailed != 6 || r.TasksOK != 2 {
		t.Errorf("%d ok, %d failed, kinds %+v; want 2 ok and %+v", r.TasksOK, r.TasksFailed, *r.FailureKinds, want)
	}
	for kind, count := range map[string]int{"connect": 0, "timeout": 2, "tls": 0, "status": 2, "other": 2} {
		if line := fmt.Sprintf(`cxlab_task_failures_total{kind=%q} %d`, kind, count); !strings.Contains(scraped, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if !strings.Contains(scraped, `cxlab_tasks_completed_total{outcome="failed"} 6`+"\n") {
		t.Errorf("metrics lack 6 failed tasks")
	}
}

// release lets a runner waiting at its start barrier go.
func release(t *testing.T, port int) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/start", port), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// The kinds of errors no test service makes on demand.
func TestClassify(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://h/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	read := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://h/", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}}
	}
	connected := func(wrote bool) *requestTrace {
		var t requestTrace
		t.gotConn.Store(true)
		t.wrote.Store(wrote)
		return &t
	}
	handshake := connected(false)
	handshake.tlsFailed.Store(true)
	for _, c := range []struct {
		name  string
		err   error
		trace *requestTrace
		want  metrics.Outcome
	}{
		{"not resolved", dial(&net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}), nil, metrics.FailedConnect},
		{"resolving timed out", dial(&net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}), nil, metrics.FailedTimeout},
		{"unreachable", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), nil, metrics.FailedConnect},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), &requestTrace{}, metrics.FailedConnect},
		{"dial timed out", dial(os.ErrDeadlineExceeded), nil, metrics.FailedTimeout},
		{"no connection had", errors.New("EOF"), &requestTrace{}, metrics.FailedConnect},
		{"reset before the request went out", read(syscall.ECONNRESET), connected(false), metrics.FailedConnect},
		{"broken pipe before the request went out", read(syscall.EPIPE), connected(false), metrics.FailedConnect},
		{"reset after it", read(syscall.ECONNRESET), connected(true), metrics.FailedOther},
		{"reset, untraced", read(syscall.ECONNRESET), nil, metrics.FailedOther},
		{"closed mid-answer", io.ErrUnexpectedEOF, connected(true), metrics.FailedOther},
		{"the handshake hung up", &url.Error{Op: "Get", URL: "https://h/", Err: io.EOF}, handshake, metrics.FailedTLS},
		{"not TLS", &url.Error{Op: "Get", URL: "https://h/", Err: tls.RecordHeaderError{Msg: "not TLS"}}, nil, metrics.FailedTLS},
		{"an alert", fmt.Errorf("remote error: %w", tls.AlertError(42)), connected(false), metrics.FailedTLS},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, nil, metrics.FailedTLS},
		{"wrong host", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}, nil, metrics.FailedTLS},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, nil, metrics.FailedTLS},
		{"a deadline", fmt.Errorf("reading: %w", context.DeadlineExceeded), connected(true), metrics.FailedTimeout},
		{"a handshake timed out", errors.Join(errors.New("tls"), os.ErrDeadlineExceeded), handshake, metrics.FailedTimeout},
		{"anything else", errors.New("something"), connected(true), metrics.FailedOther},
	} {
		if got := classify(c.err, c.trace); got != c.want {
			t.Errorf("%s (%v): %s, want %s", c.name, c.err, got.Kind(), c.want.Kind())
		}
	}
	// A task's outcome: its kind for an http task's error, other for any other workload's.
	for err, want := range map[error]metrics.Outcome{
		nil: metrics.Succeeded, errors.New("x"): metrics.FailedOther,
		&taskError{metrics.FailedTLS, errors.New("x")}:                      metrics.FailedTLS,
		fmt.Errorf("wrapped: %w", &taskError{metrics.FailedStatus, io.EOF}): metrics.FailedStatus,
	} {
		if got := outcomeOf(err); got != want {
			t.Errorf("outcomeOf(%v) = %d, want %d", err, got, want)
		}
	}
}

// A reused connection the service closes between two tasks costs no task: the transport
// sends again on a new one, as before the failure kinds.
func TestAServiceClosingKeptConnectionsFailsNothing(t *testing.T) {
	srv := testService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		answerOK(w, r)
	})
	r := httpTrial(t, srv.URL, "--tasks", "6", "--workers", "2", "--connection", "reuse", "--method", "POST", "--body", "b")
	if r.TasksOK != 6 {
		t.Errorf("%d ok of 6: %v", r.TasksOK, r.Errors)
	}
}

// A direct target's time is the service's: no RTT was simulated, so the Result has no RTT, no
// floor and no efficiency (the delay target's trials keep all three).
func TestADirectTargetHasNoFloor(t *testing.T) {
	url := testService(t, answerOK).URL
	direct := httpTrial(t, url, "--tasks", "2", "--target-mode", "direct")
	if direct.RTTSeconds != nil || direct.FloorSeconds != nil || direct.Efficiency != nil {
		t.Errorf("direct: rtt %v, floor %v, efficiency %v; want none", direct.RTTSeconds, direct.FloorSeconds, direct.Efficiency)
	}
	delay := httpTrial(t, url, "--tasks", "2", "--rtt", "1ms")
	if delay.RTTSeconds == nil || delay.FloorSeconds == nil || delay.Efficiency == nil {
		t.Errorf("delay: rtt %v, floor %v, efficiency %v; want all three", delay.RTTSeconds, delay.FloorSeconds, delay.Efficiency)
	}
}
