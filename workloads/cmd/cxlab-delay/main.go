// Command cxlab-delay is the HTTP delay target of CONTRACT.md: every request
// is answered after a round-trip time, ?rtt= and ?bytes= per request, and held
// through the stalls of --stall-every and --stall-for (?stallEvery=, ?stallFor=).
package main

import (
	"os"

	"cxlab.dev/workloads/internal/delay"
)

func main() {
	os.Exit(delay.Main(os.Args[1:], os.Stderr))
}
