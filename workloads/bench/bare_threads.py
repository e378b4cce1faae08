"""The bare minimal thread pool: ThreadPoolExecutor.map over the tasks. Prints wall and peak RSS."""

import json
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

if __name__ == "__main__":
    tasks, rtt, workers = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    begin = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(time.sleep, [rtt] * tasks))
    wall = time.monotonic() - begin
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wallSeconds": wall, "peakRssBytes": peak}))
