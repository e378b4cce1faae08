package rlimit

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestRaiseNoFile(t *testing.T) {
	got, err := RaiseNoFile()
	if err != nil {
		t.Fatal(err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if got != lim.Cur || lim.Cur != lim.Max {
		t.Errorf("returned %d; limit now %d of hard %d", got, lim.Cur, lim.Max)
	}
}
