package runner

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// headOf is an answer's head of exactly size bytes: its status line, Content-Length: 2 and
// Connection: close, filler lines of at most 4 KiB, and the blank line.
func headOf(size int) []byte {
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n")
	for k := 0; b.Len()+2 < size; k++ {
		line := fmt.Sprintf("X-Filler-%d: ", k)
		room := size - 2 - b.Len() // what is left before the blank line
		n := min(4096, room)
		if room-n > 0 && room-n < len(line)+3 { // no room for a line after this one: take it all
			n = room
		}
		b.WriteString(line + strings.Repeat("x", n-len(line)-2) + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// rawService answers each connection's request by path with what answer writes, no HTTP
// library between: the bytes a misbehaving server sends.
func rawService(t *testing.T, answer map[string]func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				line, err := bufio.NewReader(conn).ReadString('\n')
				if fields := strings.Fields(line); err == nil && len(fields) == 3 {
					answer[strings.SplitN(fields[1], "?", 2)[0]](conn)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// One bound on an answer's head, the contract's, counted as the Python models count it: a
// head of the bound is read, one byte more is a failed task of kind other; and a head
// dribbled a line at a time is cut off at --request-timeout, the whole request's bound.
func TestAnAnswersHeadIsBoundByTheContract(t *testing.T) {
	if got := len(headOf(maxResponseHeaderBytes)); got != maxResponseHeaderBytes {
		t.Fatalf("the test's head is %d bytes", got)
	}
	url := rawService(t, map[string]func(net.Conn){
		"/at":   func(c net.Conn) { _, _ = c.Write(append(headOf(maxResponseHeaderBytes), "ok"...)) },
		"/over": func(c net.Conn) { _, _ = c.Write(append(headOf(maxResponseHeaderBytes+1), "ok"...)) },
		"/dribble": func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n"))
			for k := range 30 { // 3 s of it
				if _, err := fmt.Fprintf(c, "X-Slow-%d: 1\r\n", k); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			_, _ = c.Write([]byte("Content-Length: 2\r\n\r\nok"))
		},
	})
	flags := []string{"--target-mode", "direct", "--tasks", "2", "--workers", "2", "--request-timeout", "5s"}
	if r := httpTrial(t, url+"/at", flags...); r.TasksOK != 2 {
		t.Errorf("a head of the bound: %d ok, errors %v", r.TasksOK, r.Errors)
	}
	r := httpTrial(t, url+"/over", flags...)
	if r.FailureKinds.Other != 2 || len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, fmt.Sprint(maxResponseHeaderBytes)) {
		t.Errorf("a head of the bound + 1: kinds %+v, errors %v", *r.FailureKinds, r.Errors)
	}
	r = httpTrial(t, url+"/dribble", append(flags[:len(flags)-1], "500ms")...)
	if r.FailureKinds.Timeout != 2 || r.WallSeconds > 1.5 {
		t.Errorf("a dribbled head: kinds %+v in %.2f s, want 2 timeouts within about 0.5 s", *r.FailureKinds, r.WallSeconds)
	}
}
