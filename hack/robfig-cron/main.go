// Command robfig-cron answers, for each JSON line {"spec", "zone", "after", "count"} on stdin,
// with one JSON line on stdout: the next count (default -n) firing times after "after"
// (RFC 3339) of spec read by cron.ParseStandard, in zone (time.LoadLocation), as RFC 3339 UTC
// times; or the error that refused the spec or zone. Fewer times than asked: robfig found no
// firing time within its five-year search (it returned the zero time).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/robfig/cron/v3"
)

type query struct {
	Spec  string `json:"spec"`
	Zone  string `json:"zone"`
	After string `json:"after"`
	Count int    `json:"count"`
}

type answer struct {
	Times []string `json:"times"`           // null when Error says why there are none
	Error string   `json:"error,omitempty"` // the parser's or time.LoadLocation's
}

func main() {
	count := flag.Int("n", 5, "firing times per query when the query does not say")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintf(os.Stderr, "robfig-cron: bad query %q: %v\n", in.Text(), err)
			os.Exit(2)
		}
		if q.Count == 0 {
			q.Count = *count
		}
		if err := encoder.Encode(next(q)); err != nil {
			fmt.Fprintf(os.Stderr, "robfig-cron: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "robfig-cron: reading stdin: %v\n", err)
		os.Exit(1)
	}
}

func next(q query) answer {
	schedule, err := cron.ParseStandard(q.Spec)
	if err != nil {
		return answer{Error: err.Error()}
	}
	zone, err := time.LoadLocation(q.Zone)
	if err != nil {
		return answer{Error: err.Error()}
	}
	after, err := time.Parse(time.RFC3339Nano, q.After)
	if err != nil {
		return answer{Error: fmt.Sprintf("after: %v", err)}
	}
	// A spec without TZ= has time.Local as its Location, which Next reads as "the zone of the
	// time given": the zone is the one of after, as the CronJob controller's TZ= prefix would set.
	at := after.In(zone)
	times := []string{}
	for len(times) < q.Count {
		at = schedule.Next(at)
		if at.IsZero() {
			break
		}
		times = append(times, at.UTC().Format(time.RFC3339))
	}
	return answer{Times: times}
}
