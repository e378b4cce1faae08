// pause holds a Pod's namespaces: it sleeps until SIGINT or SIGTERM and reaps the zombies
// of the Pod's processes when it is their init (shared PID namespace). It is the sandbox
// image of the local cluster (cxlab.dev/pause:dev), since no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
