"""The bare minimal asyncio program: one coroutine per task, gathered. Prints wall and peak RSS."""

import asyncio
import json
import sys
import time

from _peak import peak_rss_bytes


async def main(tasks: int, rtt: float) -> float:
    begin = time.monotonic()
    await asyncio.gather(*(asyncio.sleep(rtt) for _ in range(tasks)))
    return time.monotonic() - begin


if __name__ == "__main__":
    wall = asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
    peak = peak_rss_bytes()
    print(json.dumps({"wallSeconds": wall, "peakRssBytes": peak}))
