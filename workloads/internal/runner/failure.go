package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http/httptrace"
	"os"
	"sync/atomic"
	"syscall"

	"cxlab.dev/workloads/internal/metrics"
)

// taskError is a failed task's error with its kind (CONTRACT.md, Failed tasks and their
// kinds); its message is the error's own, so the Result's errors read as before.
type taskError struct {
	kind metrics.Outcome
	err  error
}

func (e *taskError) Error() string { return e.err.Error() }
func (e *taskError) Unwrap() error { return e.err }

// outcomeOf is how a task that returned err ended: succeeded for nil, its kind for an http
// task's error, other for any other workload's.
func outcomeOf(err error) metrics.Outcome {
	if err == nil {
		return metrics.Succeeded
	}
	if te, ok := errors.AsType[*taskError](err); ok {
		return te.kind
	}
	return metrics.FailedOther
}

// FailureKinds is the Result's failureKinds: the failed tasks by kind, summing to tasksFailed.
// Its keys are the contract's kinds in their order (metrics.FailureKinds).
type FailureKinds struct {
	Connect int64 `json:"connect"`
	Timeout int64 `json:"timeout"`
	TLS     int64 `json:"tls"`
	Status  int64 `json:"status"`
	Other   int64 `json:"other"`
}

func newFailureKinds(f metrics.Failures) *FailureKinds {
	return &FailureKinds{Connect: f[0], Timeout: f[1], TLS: f[2], Status: f[3], Other: f[4]}
}

// requestTrace is what one request's httptrace saw, for the kind of its failure. The hooks may
// run on the transport's goroutines, and a dial the request gave up on may still end after it
// returned: atomics.
type requestTrace struct {
	gotConn   atomic.Bool // a connection was had (dialled or reused)
	tlsFailed atomic.Bool // a TLS handshake for it failed
	wrote     atomic.Bool // the whole request went out
}

func (t *requestTrace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { t.gotConn.Store(true) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				t.tlsFailed.Store(true)
			}
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				t.wrote.Store(true)
			}
		},
	}
}

// classify gives a failed request's error (from sending it or reading its answer) its kind,
// the first that applies:
//
//   - timeout: the request's time bound (or a dial's, a DNS lookup's) passed: an error in the
//     chain says Timeout(), or a deadline was exceeded;
//   - tls: the TLS handshake failed (the trace saw it) or a TLS or certificate error is in the
//     chain (a record that is no TLS, an alert, a certificate not verified);
//   - connect: no connection: a dial or DNS error, refused, unreachable, no connection had at
//     all, or reset (or a broken pipe) before the request went out;
//   - other: anything else, e.g. the connection closed in the middle of the answer.
//
// A status not counted as success never gets here: the task makes that kind itself. t may be
// nil (no trace): the error's types decide alone.
func classify(err error, t *requestTrace) metrics.Outcome {
	switch {
	case isTimeout(err):
		return metrics.FailedTimeout
	case isTLS(err) || t != nil && t.tlsFailed.Load():
		return metrics.FailedTLS
	case isConnect(err, t):
		return metrics.FailedConnect
	}
	return metrics.FailedOther
}

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		inChain(err, func(e error) bool {
			timeout, ok := e.(interface{ Timeout() bool })
			return ok && timeout.Timeout()
		})
}

func isTLS(err error) bool {
	return inChain(err, func(e error) bool {
		switch e.(type) {
		case tls.RecordHeaderError, *tls.CertificateVerificationError, tls.AlertError, *tls.ECHRejectionError,
			x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError, x509.SystemRootsError,
			x509.UnhandledCriticalExtension, x509.ConstraintViolationError, x509.InsecureAlgorithmError:
			return true
		}
		return false
	})
}

func isConnect(err error, t *requestTrace) bool {
	switch {
	case inChain(err, func(e error) bool {
		op, ok := e.(*net.OpError)
		return ok && op.Op == "dial"
	}):
		return true
	case inChain(err, func(e error) bool { _, ok := e.(*net.DNSError); return ok }):
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EADDRNOTAVAIL} {
		if errors.Is(err, errno) {
			return true
		}
	}
	if t == nil {
		return false
	}
	if !t.gotConn.Load() {
		return true // no connection at all
	}
	return !t.wrote.Load() && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// inChain reports whether match holds for err or any error it wraps (errors.Join's too).
func inChain(err error, match func(error) bool) bool {
	if err == nil {
		return false
	}
	if match(err) {
		return true
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return inChain(e.Unwrap(), match)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if inChain(inner, match) {
				return true
			}
		}
	}
	return false
}
