"""The bare prestarted pool: W threads started up front, each pulling tasks from a shared
counter until none is left (cxlab's `pool: prestarted`). Prints wall, peak RSS and threads."""

import itertools
import json
import sys
import threading
import time

from _peak import peak_rss_bytes

if __name__ == "__main__":
    tasks, rtt, workers = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    handed_out = itertools.count()

    def work() -> None:
        while next(handed_out) < tasks:
            time.sleep(rtt)

    begin = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(min(workers, tasks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - begin
    print(json.dumps({"wallSeconds": wall, "peakRssBytes": peak_rss_bytes(),
                      "threadsStarted": len(threads)}))  # fmt: skip
