// Package rlimit raises the open-files limit, which bounds how many
// connections a trial can hold at once.
package rlimit

import "golang.org/x/sys/unix"

// RaiseNoFile lifts the RLIMIT_NOFILE soft limit to the hard limit and
// returns the soft limit in effect afterwards. Go already does this at start
// since Go 1.19; doing it here too makes the limit explicit and logged.
func RaiseNoFile() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, err
		}
		lim = raised
	}
	return lim.Cur, nil
}
