package measure

import (
	"bytes"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Host is the Result's host (CONTRACT.md, Result): the CPU model and the kernel release the
// runner sees from inside its container, the schedules' environment fingerprint. The Python
// runner's copy (cxlab_runner/host.py) reads the same; both parse
// workloads/testdata/cpuinfo.json alike.
type Host struct {
	CPUModel string `json:"cpuModel"`
	Kernel   string `json:"kernel"`
}

const (
	cpuinfoPath   = "/proc/cpuinfo"
	unknownHost   = "unknown"
	maxHostLength = 256 // the schema's maxLength of both fields
)

// ReadHost returns this process's host, read on the first call. Never an error: a trial's
// measurements matter more than its fingerprint.
var ReadHost = sync.OnceValue(func() Host { return readHost(cpuinfoPath) })

func readHost(cpuinfoPath string) Host {
	var uname unix.Utsname
	kernel, machine := unknownHost, []byte(nil)
	if unix.Uname(&uname) == nil {
		kernel = cleanHost(unix.ByteSliceToString(uname.Release[:]))
		machine = []byte(unix.ByteSliceToString(uname.Machine[:]))
	}
	if kernel == "" {
		kernel = unknownHost
	}
	cpuinfo, err := os.ReadFile(cpuinfoPath)
	if err != nil {
		cpuinfo = nil
	} else if cpuinfo == nil {
		cpuinfo = []byte{} // read, and empty: not the unreadable nil
	}
	return Host{CPUModel: CPUModel(cpuinfo, machine), Kernel: kernel}
}

// CPUModel is the first "model name" of /proc/cpuinfo; without one (arm64) its first
// "Hardware", else its "CPU implementer" and "CPU part" ("implementer 0x41 part 0xd0c"), else
// the machine (uname -m). "unknown" when /proc/cpuinfo could not be read (nil).
func CPUModel(cpuinfo, machine []byte) string {
	if cpuinfo == nil {
		return unknownHost
	}
	first := map[string]string{}
	for line := range bytes.SplitSeq(cpuinfo, []byte("\n")) {
		key, value, colon := bytes.Cut(line, []byte(":"))
		key, value = bytes.Trim(key, " \t"), bytes.Trim(value, " \t")
		if _, seen := first[string(key)]; colon && len(value) > 0 && !seen {
			first[string(key)] = string(value)
		}
		if _, ok := first["model name"]; ok {
			break
		}
	}
	if v, ok := first["model name"]; ok {
		return cleanHost(v)
	}
	if v, ok := first["Hardware"]; ok {
		return cleanHost(v)
	}
	implementer, hasImplementer := first["CPU implementer"]
	if part, hasPart := first["CPU part"]; hasImplementer && hasPart {
		return cleanHost("implementer " + implementer + " part " + part)
	}
	if m := cleanHost(string(machine)); m != "" {
		return m
	}
	return unknownHost
}

// cleanHost keeps at most maxHostLength bytes, printable ASCII only (any other byte becomes
// ?): the same text from both runners whatever the kernel wrote.
func cleanHost(s string) string {
	b := []byte(s[:min(len(s), maxHostLength)])
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
