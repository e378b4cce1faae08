package runner

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ExitNotReleased is the contract's status of a runner never released from its start
// barrier.
const ExitNotReleased = 3

// errNotReleased ends a trial whose runner waited at the barrier for --barrier-timeout.
var errNotReleased = errors.New("not released from the start barrier")

// startBarrier is the contract's start barrier: ready once the runner waits (GET /ready),
// released by POST /start, which is idempotent and remembered if it comes early.
type startBarrier struct {
	timeout  time.Duration // 0: no barrier
	arrived  atomic.Bool
	released chan struct{}
	once     sync.Once
}

func newStartBarrier(timeout time.Duration) *startBarrier {
	return &startBarrier{timeout: timeout, released: make(chan struct{})}
}

func (b *startBarrier) release() { b.once.Do(func() { close(b.released) }) }

// wait blocks until the release, at most the timeout; it returns how long it waited, and
// nil without a barrier.
func (b *startBarrier) wait() (*float64, error) {
	if b.timeout == 0 {
		return nil, nil
	}
	b.arrived.Store(true)
	began := time.Now()
	timer := time.NewTimer(b.timeout)
	defer timer.Stop()
	select {
	case <-b.released:
		waited := round6(time.Since(began).Seconds())
		return &waited, nil
	case <-timer.C:
		return nil, fmt.Errorf("%w within %v", errNotReleased, b.timeout)
	}
}

// handle serves GET /ready and POST /start on the metrics endpoint.
func (b *startBarrier) handle(mux *http.ServeMux) {
	serveFlag(mux, "GET /ready", &b.arrived, "ready", "not ready")
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, _ *http.Request) {
		b.release()
		fmt.Fprintln(w, "released")
	})
}
