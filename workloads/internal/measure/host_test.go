package measure

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The cpuinfo cases the Python runner's test parses too (workloads/testdata/cpuinfo.json).
func TestSharedCPUInfoCases(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/cpuinfo.json")
	if err != nil {
		t.Fatal(err)
	}
	var shared struct {
		Cases []struct {
			Name     string  `json:"name"`
			CPUInfo  *string `json:"cpuinfo"` // null: unreadable
			Machine  string  `json:"machine"`
			CPUModel string  `json:"cpuModel"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &shared); err != nil {
		t.Fatal(err)
	}
	if len(shared.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range shared.Cases {
		var cpuinfo []byte
		if c.CPUInfo != nil {
			cpuinfo = []byte(*c.CPUInfo)
			if cpuinfo == nil {
				cpuinfo = []byte{}
			}
		}
		if got := CPUModel(cpuinfo, []byte(c.Machine)); got != c.CPUModel {
			t.Errorf("%s: %q, want %q", c.Name, got, c.CPUModel)
		}
	}
}

// This machine's host: a CPU model, and the kernel release uname -r prints.
func TestReadHost(t *testing.T) {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	h := ReadHost()
	if h.CPUModel == "" || h.CPUModel == unknownHost {
		t.Errorf("cpuModel %q", h.CPUModel)
	}
	if want := strings.TrimSpace(string(out)); h.Kernel != want {
		t.Errorf("kernel %q, uname -r says %q", h.Kernel, want)
	}
	if again := ReadHost(); again != h {
		t.Errorf("read again: %+v, first %+v", again, h)
	}
}

// An unreadable /proc/cpuinfo is an unknown CPU model, not an error: the trial goes on.
func TestAnUnreadableCPUInfoIsUnknown(t *testing.T) {
	h := readHost(filepath.Join(t.TempDir(), "no-cpuinfo"))
	if h.CPUModel != unknownHost || h.Kernel == "" || h.Kernel == unknownHost {
		t.Errorf("%+v", h)
	}
}
