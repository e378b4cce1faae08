package delay

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// --metrics-port listens on --listen's host: a target told to serve one address serves its
// metrics there, not on every interface.
func TestMetricsAreServedOnTheListenHostOnly(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this loopback: %v", err)
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	c, err := ParseFlags([]string{"--listen", "127.0.0.2:0", "--metrics-port", strconv.Itoa(port), "--rtt", "0s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve(ctx, c, log.New(io.Discard, "", 0)) }()
	defer func() {
		cancel()
		if status := <-done; status != 0 {
			t.Errorf("serve returned %d", status)
		}
	}()
	at := "http://" + net.JoinHostPort("127.0.0.2", strconv.Itoa(port)) + "/metrics"
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(at)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", at, resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics at %s: %v", at, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Bound to 0.0.0.0, the port would answer on every address, 127.0.0.1 too.
	other, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err == nil {
		other.Close()
		t.Fatalf("the metrics port %d answers on 127.0.0.1 too: not bound to --listen's host", port)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialling 127.0.0.1:%d: %v (want refused)", port, err)
	}
}

func TestTheMetricsAddressIsTheListenHostsWithTheMetricsPort(t *testing.T) {
	for listen, want := range map[string]string{
		":8080":          ":9090", // every interface, as --listen says
		"127.0.0.1:8080": "127.0.0.1:9090",
		"[::1]:0":        "[::1]:9090",
		"localhost:80":   "localhost:9090",
	} {
		got, err := Config{Listen: listen, MetricsPort: 9090}.metricsAddress()
		if err != nil || got != want {
			t.Errorf("--listen %s: metrics on %q, %v; want %q", listen, got, err, want)
		}
	}
	if _, err := (Config{Listen: "no-port", MetricsPort: 9090}).metricsAddress(); err == nil {
		t.Error("--listen without a port: no error")
	}
}
