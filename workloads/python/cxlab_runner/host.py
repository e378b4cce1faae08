"""The Result's host (CONTRACT.md, Result): the CPU model and the kernel release a runner sees
from inside its container, the schedules' environment fingerprint. Read once per process and
never an error: a trial's measurements matter more than its fingerprint. The Go runner's copy
(internal/measure/host.go) reads the same; both parse workloads/testdata/cpuinfo.json alike."""

from __future__ import annotations

import os
from functools import cache

from cxlab_contract.result import Host

CPUINFO = "/proc/cpuinfo"
UNKNOWN = "unknown"
MAX_LENGTH = 256  # the schema's maxLength of both fields


@cache
def host() -> Host:
    """This process's host, read on the first call."""
    return read_host(CPUINFO)


def read_host(cpuinfo_path: str) -> Host:
    uname = os.uname()
    try:
        with open(cpuinfo_path, "rb") as file:
            cpuinfo: bytes | None = file.read()
    except OSError:
        cpuinfo = None
    kernel = clean(os.fsencode(uname.release)) or UNKNOWN
    return {"cpuModel": cpu_model(cpuinfo, os.fsencode(uname.machine)), "kernel": kernel}


def cpu_model(cpuinfo: bytes | None, machine: bytes) -> str:
    """The first "model name" of /proc/cpuinfo; without one (arm64) its first "Hardware", else
    its "CPU implementer" and "CPU part" ("implementer 0x41 part 0xd0c"), else the machine
    (uname -m). "unknown" when /proc/cpuinfo could not be read (None)."""
    if cpuinfo is None:
        return UNKNOWN
    first: dict[bytes, bytes] = {}
    for line in cpuinfo.split(b"\n"):
        key, colon, value = line.partition(b":")
        key, value = key.strip(b" \t"), value.strip(b" \t")
        if colon and value:
            first.setdefault(key, value)
        if b"model name" in first:
            break
    if b"model name" in first:
        return clean(first[b"model name"])
    if b"Hardware" in first:
        return clean(first[b"Hardware"])
    if b"CPU implementer" in first and b"CPU part" in first:
        return clean(b"implementer %s part %s" % (first[b"CPU implementer"], first[b"CPU part"]))
    return clean(machine) or UNKNOWN


def clean(raw: bytes) -> str:
    """At most MAX_LENGTH bytes, printable ASCII only (any other byte becomes ?): the same text
    from both runners whatever the kernel wrote."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E else "?" for b in raw[:MAX_LENGTH])
