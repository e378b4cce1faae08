package runner

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxDoneWait bounds GET /done?wait=S: a long poll answers within it whatever S asks.
const maxDoneWait = 30 * time.Second

// endOfTasks is the contract's end of the task phase, told to whoever drives the runner:
// GET /done answers 200 once the Result is written (the trial Pod's readiness probe, so a
// Ready trial Pod is one with final values to read) and 503 before; GET /result answers the
// Result itself from then on, the bytes written to stdout and --result-path (the operator
// records a trial without waiting for the container's exit); the first GET
// /metrics?final=1 after that is the final read the runner waits for with --final-read.
type endOfTasks struct {
	done       atomic.Bool
	result     atomic.Pointer[[]byte] // the Result as written, once it is
	finished   chan struct{}          // closed with done: the long polls of /done return
	finishOnce sync.Once
	read       chan struct{} // closed by the final read
	readOnce   sync.Once
}

func newEndOfTasks() *endOfTasks {
	return &endOfTasks{finished: make(chan struct{}), read: make(chan struct{})}
}

// finish marks the end of the tasks; result is the Result as written, newline included.
func (e *endOfTasks) finish(result []byte) {
	e.result.Store(&result)
	e.done.Store(true)
	e.finishOnce.Do(func() { close(e.finished) })
}

// handle serves GET /done, GET /result, and GET /metrics through metrics, noting the final
// read once the whole answer is written (a read before the end is not final: its values can
// still move). GET /result ends nothing: it is not the final read.
func (e *endOfTasks) handle(mux *http.ServeMux, metrics http.Handler) {
	flag := flagHandler(&e.done, "done", "running")
	// GET /done?wait=S: the driver's long poll (the operator's), answered as soon as the
	// Result is written instead of at a probe's next period; at most S (maxDoneWait).
	mux.HandleFunc("GET /done", func(w http.ResponseWriter, r *http.Request) {
		if wait, err := strconv.ParseFloat(r.URL.Query().Get("wait"), 64); err == nil && wait > 0 {
			t := time.NewTimer(min(time.Duration(wait*float64(time.Second)), maxDoneWait))
			defer t.Stop()
			select {
			case <-e.finished:
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		flag(w, r)
	})
	mux.HandleFunc("GET /result", func(w http.ResponseWriter, _ *http.Request) {
		result := e.result.Load()
		if result == nil {
			http.Error(w, "running", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(*result)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		final := e.done.Load() && r.URL.Query().Get("final") == "1"
		metrics.ServeHTTP(w, r)
		if final {
			e.readOnce.Do(func() { close(e.read) })
		}
	})
}

// afterTasks keeps the metrics endpoint up once the Result is written: for linger (a scraper
// sees the final values) and, with finalRead, until the final read, at most finalRead;
// whichever ends later. It reports whether a final read it waited for never came. ctx's end
// (SIGINT, SIGTERM) ends both.
func (e *endOfTasks) afterTasks(ctx context.Context, linger, finalRead time.Duration) (missed bool) {
	lingerEnd := time.Now().Add(linger)
	if finalRead > 0 {
		t := time.NewTimer(finalRead)
		defer t.Stop()
		select {
		case <-e.read:
		case <-t.C:
			missed = true
		case <-ctx.Done():
			return false
		}
	}
	if rest := time.Until(lingerEnd); rest > 0 {
		t := time.NewTimer(rest)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return missed
}

// serveFlag answers pattern with 200 and yes once set holds, 503 and no before: the probes
// of the contract (/ready, /done).
func serveFlag(mux *http.ServeMux, pattern string, set *atomic.Bool, yes, no string) {
	mux.HandleFunc(pattern, flagHandler(set, yes, no))
}

func flagHandler(set *atomic.Bool, yes, no string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !set.Load() {
			http.Error(w, no, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, yes)
	}
}
