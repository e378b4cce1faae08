"""The bare minimal thread pool: ThreadPoolExecutor.map over the tasks, which starts a thread
only when no thread is idle. Prints wall, peak RSS and the threads it started."""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from _peak import peak_rss_bytes

if __name__ == "__main__":
    tasks, rtt, workers = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    begin = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(time.sleep, [rtt] * tasks))
    wall = time.monotonic() - begin
    peak = peak_rss_bytes()
    started = len(pool._threads)  # private, but the only count of threads it started
    print(json.dumps({"wallSeconds": wall, "peakRssBytes": peak, "threadsStarted": started}))
