"""The bare minimal gevent program: one greenlet per task, joined. Prints wall and peak RSS."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402 - after monkey-patching, as any gevent program
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from _peak import peak_rss_bytes  # noqa: E402

if __name__ == "__main__":
    tasks, rtt = int(sys.argv[1]), float(sys.argv[2])
    begin = time.monotonic()
    gevent.joinall([gevent.spawn(gevent.sleep, rtt) for _ in range(tasks)])
    wall = time.monotonic() - begin
    peak = peak_rss_bytes()
    print(json.dumps({"wallSeconds": wall, "peakRssBytes": peak}))
