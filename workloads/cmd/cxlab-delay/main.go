// Command cxlab-delay is the HTTP delay target of CONTRACT.md: every request,
// of any method (a body is read and discarded), is answered after a round-trip
// time, ?rtt= and ?bytes= per request, and held through the stalls of
// --stall-every and --stall-for (?stallEvery=, ?stallFor=). It doubles as a
// small HTTP service of cxlab's own: ?status=NNN (200-599) answers with that
// status after the delay (a bad one: 400), and --require-header NAME answers
// 401 at once to every request but GET /healthz that lacks header NAME with
// the value of the environment variable CXLAB_DELAY_REQUIRED_VALUE (read once
// at start, never logged). cxlab-delay --help says it all.
package main

import (
	"os"

	"cxlab.dev/workloads/internal/delay"
)

func main() {
	os.Exit(delay.Main(os.Args[1:], os.Stderr))
}
