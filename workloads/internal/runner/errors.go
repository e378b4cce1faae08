package runner

import (
	"cmp"
	"slices"
	"sync"
	"unicode/utf8"
)

const (
	maxErrorKinds   = 5    // distinct messages in the Result
	maxMessageRunes = 200  // schema maxLength, counted in characters
	maxTracked      = 1024 // distinct messages tallied before lumping the rest
	otherErrors     = "other errors (too many distinct messages)"
)

// ErrorCount is one line of the Result's errors.
type ErrorCount struct {
	Message string `json:"message"`
	Count   int64  `json:"count"`
}

// errorTally counts failures by message. It is touched only by failed tasks,
// so a mutex is cheap enough; the map is bounded so a flood of distinct
// messages cannot grow memory without limit.
type errorTally struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (t *errorTally) add(msg string) {
	msg = truncate(msg, maxMessageRunes)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = make(map[string]int64)
	}
	if _, seen := t.counts[msg]; !seen && len(t.counts) >= maxTracked {
		msg = otherErrors
	}
	t.counts[msg]++
}

// top returns the n most frequent messages, most frequent first (ties in
// message order so the Result is deterministic).
func (t *errorTally) top(n int) []ErrorCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ErrorCount, 0, len(t.counts))
	for m, c := range t.counts {
		out = append(out, ErrorCount{m, c})
	}
	slices.SortFunc(out, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Message, b.Message))
	})
	return out[:min(n, len(out))]
}

// truncate cuts s to at most n characters without splitting one.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}
