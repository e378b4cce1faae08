// etcd for the local cluster, at the version Kubernetes 1.32 pins (go.etcd.io/etcd v3.5.16):
// Debian's etcd-server is 3.4, which Kubernetes 1.32 no longer supports (the apiserver's
// watch cache waits for progress notifications that 3.4 cannot send).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
