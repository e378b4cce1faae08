package runner

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"cxlab.dev/workloads/internal/measure"
)

// validateResult checks a Result against result-v1.schema.json. The module takes no JSON
// Schema library, so schemaErrors checks the keywords that schema uses and refuses any other:
// a schema that grows a keyword is never half-checked.
func validateResult(t *testing.T, b []byte) {
	t.Helper()
	var schema map[string]any
	readJSON(t, "../../python/cxlab_contract/result-v1.schema.json", &schema)
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	errs := schemaErrors(schema, schema, doc, "Result")
	slices.Sort(errs) // map order is random; the report should not be
	for _, e := range errs {
		t.Errorf("schema: %s", e)
	}
}

// schemaErrors checks v against schema, a part of root (where a $ref points).
func schemaErrors(root, schema map[string]any, v any, at string) (errs []string) {
	bad := func(format string, a ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, a...)) }
	obj, isObj := v.(map[string]any)
	arr, isArr := v.([]any)
	num, isNum := v.(float64)
	str, isStr := v.(string)
	for key, rule := range schema {
		switch key {
		case "$schema", "$id", "title", "description", "$defs": // $defs: checked where a $ref points
		case "$ref": // a JSON pointer within root, as "#/properties/latencyHistogram"
			target := any(root)
			for _, step := range strings.Split(strings.TrimPrefix(rule.(string), "#/"), "/") {
				target = target.(map[string]any)[step]
			}
			errs = append(errs, schemaErrors(root, target.(map[string]any), v, at)...)
		case "type":
			types, ok := rule.([]any)
			if !ok {
				types = []any{rule}
			}
			if !slices.ContainsFunc(types, func(t any) bool { return hasType(v, t.(string)) }) {
				bad("%v is not %v", v, rule)
			}
		case "const":
			if !reflect.DeepEqual(v, rule) {
				bad("%v is not %v", v, rule)
			}
		case "enum":
			if !slices.ContainsFunc(rule.([]any), func(e any) bool { return reflect.DeepEqual(e, v) }) {
				bad("%v is not one of %v", v, rule)
			}
		case "minimum":
			if isNum && num < rule.(float64) {
				bad("%v < %v", num, rule)
			}
		case "exclusiveMinimum":
			if isNum && num <= rule.(float64) {
				bad("%v <= %v", num, rule)
			}
		case "maximum":
			if isNum && num > rule.(float64) {
				bad("%v > %v", num, rule)
			}
		case "maxLength":
			if isStr && utf8.RuneCountInString(str) > int(rule.(float64)) {
				bad("longer than %v characters", rule)
			}
		case "minItems", "maxItems":
			if n := float64(len(arr)); isArr && (key == "minItems" && n < rule.(float64) || key == "maxItems" && n > rule.(float64)) {
				bad("%d items, %s %v", len(arr), key, rule)
			}
		case "minProperties", "maxProperties":
			if n := float64(len(obj)); isObj && (key == "minProperties" && n < rule.(float64) || key == "maxProperties" && n > rule.(float64)) {
				bad("%d properties, %s %v", len(obj), key, rule)
			}
		case "required":
			for _, name := range rule.([]any) {
				if _, ok := obj[name.(string)]; isObj && !ok {
					bad("%s is missing", name)
				}
			}
		case "items":
			for i, item := range arr {
				errs = append(errs, schemaErrors(root, rule.(map[string]any), item, fmt.Sprintf("%s[%d]", at, i))...)
			}
		case "properties":
			for name, sub := range rule.(map[string]any) {
				if value, ok := obj[name]; ok {
					errs = append(errs, schemaErrors(root, sub.(map[string]any), value, at+"."+name)...)
				}
			}
		case "additionalProperties":
			declared, _ := schema["properties"].(map[string]any)
			for name, value := range obj {
				if _, ok := declared[name]; ok {
					continue
				}
				if sub, ok := rule.(map[string]any); ok {
					errs = append(errs, schemaErrors(root, sub, value, at+"."+name)...)
				} else if rule == false {
					bad("%s is not in the schema", name)
				}
			}
		default:
			bad("schema keyword %q is not checked by this test", key)
		}
	}
	return errs
}

// hasType is JSON Schema's type test on a value decoded by encoding/json.
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v)
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// The checker itself: it must catch what the schema forbids, or a passing e2e test means
// nothing.
func TestTheSchemaCheckerCatchesViolations(t *testing.T) {
	var schema map[string]any
	readJSON(t, "../../python/cxlab_contract/result-v1.schema.json", &schema)
	r := Result{Schema: Schema, Pods: 1, Model: "goroutines", Workload: "sleep", Workers: 1, Tasks: 1,
		PeakThreads: 1, CPUs: []int{0}, RSSTimeline: RSSTimeline{IntervalSeconds: 0.05}}
	r.PodIndex = new(int)
	r.Host = &measure.Host{CPUModel: strings.Repeat("c", 256), Kernel: "6.1.0-18-amd64"} // at its bound
	counted, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	arrivals, err := os.ReadFile("../../testdata/truncated-arrival-result.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, valid := range [][]byte{counted, arrivals} {
		var doc map[string]any
		if err := json.Unmarshal(valid, &doc); err != nil {
			t.Fatal(err)
		}
		if errs := schemaErrors(schema, schema, doc, "Result"); len(errs) != 0 {
			t.Fatalf("a valid Result refused: %v", errs)
		}
	}
	arrival := func(d map[string]any) map[string]any { return d["arrival"].(map[string]any) }
	for name, spoil := range map[string]func(map[string]any){
		"missing key":         func(d map[string]any) { delete(d, "latencyHistogram") },
		"extra key":           func(d map[string]any) { d["bogus"] = 1 },
		"podIndex too big":    func(d map[string]any) { d["podIndex"] = 65.0 },
		"wait below 0":        func(d map[string]any) { d["barrierWaitSeconds"] = -0.5 },
		"fractional integer":  func(d map[string]any) { d["pods"] = 1.5 },
		"nested extra key":    func(d map[string]any) { d["latencyHistogram"].(map[string]any)["p50"] = 1.0 },
		"negative count":      func(d map[string]any) { d["latencyHistogram"].(map[string]any)["counts"] = []any{-1.0} },
		"wrong const":         func(d map[string]any) { d["schema"] = "v2" },
		"not in the enum":     func(d map[string]any) { d["model"] = "fibers" },
		"zero interval":       func(d map[string]any) { d["rssTimeline"].(map[string]any)["intervalSeconds"] = 0.0 },
		"null where required": func(d map[string]any) { d["startedAtUnixSeconds"] = nil },
		// An arrival Result's: its histograms are $refs to latencyHistogram.
		"negative count through a $ref": func(d map[string]any) {
			arrival(d)["waitHistogram"].(map[string]any)["counts"] = []any{-1.0}
		},
		"missing key through a $ref":  func(d map[string]any) { delete(arrival(d)["serviceHistogram"].(map[string]any), "sum") },
		"a saturation too long":       func(d map[string]any) { arrival(d)["saturation"] = strings.Repeat("x", 201) },
		"a 65th interval":             func(d map[string]any) { d["timeline"].(map[string]any)["p99"] = make([]any, 65) },
		"an unknown arrival process":  func(d map[string]any) { arrival(d)["process"] = "bursty" },
		"a warm-up without its tasks": func(d map[string]any) { delete(d["warmup"].(map[string]any), "tasksOk") },
		// The host: counted, not arrivals (a name starting with "a" takes the arrival Result).
		"host with an extra key":   func(d map[string]any) { d["host"].(map[string]any)["cores"] = "8" },
		"host without its kernel":  func(d map[string]any) { delete(d["host"].(map[string]any), "kernel") },
		"host cpuModel too long":   func(d map[string]any) { d["host"].(map[string]any)["cpuModel"] = strings.Repeat("c", 257) },
		"host kernel not a string": func(d map[string]any) { d["host"].(map[string]any)["kernel"] = 6.1 },
		"host not an object":       func(d map[string]any) { d["host"] = "x86_64" },
	} {
		valid := counted
		if strings.Contains(name, "$ref") || strings.HasPrefix(name, "a") {
			valid = arrivals
		}
		var spoilt map[string]any
		if err := json.Unmarshal(valid, &spoilt); err != nil {
			t.Fatal(err)
		}
		spoil(spoilt)
		if errs := schemaErrors(schema, schema, spoilt, "Result"); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
