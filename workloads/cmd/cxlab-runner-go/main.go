// Command cxlab-runner-go runs one trial of the goroutines concurrency model
// as CONTRACT.md describes and prints its Result.
package main

import (
	"os"

	"cxlab.dev/workloads/internal/runner"
)

func main() {
	os.Exit(runner.Main(os.Args[1:], os.Stdout, os.Stderr))
}
