package runner

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The same oversized Result the Python runner's test truncates (workloads/testdata): both
// runners must cut it to the same document (tests/test_contract.py holds the Python half).
func TestTruncationIsTheContractsRule(t *testing.T) {
	var r Result
	readJSON(t, "../../testdata/oversized-result.json", &r)
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("%d bytes, over %d", len(b), MaxResultBytes)
	}
	var got, want map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	readJSON(t, "../../testdata/truncated-result.json", &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the Go runner truncates differently:\n got %d errors, %v timeline samples\nwant %d errors, %v",
			len(got["errors"].([]any)), len(got["rssTimeline"].(map[string]any)["rssBytes"].([]any)),
			len(want["errors"].([]any)), len(want["rssTimeline"].(map[string]any)["rssBytes"].([]any)))
	}
}
