"""What every model's http task sends (CONTRACT.md, Flags): where (--target-url, with ?rtt=
for the delay target), within what bound (--request-timeout, the whole request's), over what
TLS, and whether a worker keeps its connection. The clients are http_blocking.py and
http_async.py (locust's is geventhttpclient, models/locust_model.py)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from cxlab_contract.durations import format_duration
from cxlab_runner.config import RunnerConfig

# --request-timeout 0s: a task waits at most this long for the delay target before it fails.
HTTP_TIMEOUT_SECONDS = 300.0
# Methods whose request carries Content-Length even with no body (as http.client and Go send).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
READ_BYTES = 65536


@dataclass(frozen=True)
class Target:
    """Where an http task's request goes."""

    scheme: str
    host: str
    port: int
    path: str  # with the query: the request line's target

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def authority(self) -> str:
        """The Host header: the port only when it is not the scheme's own."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"


def request_target(config: RunnerConfig) -> Target:
    """--target-url, with ?rtt= added for the delay target (--target-mode delay)."""
    assert config.target_url is not None  # checked with the flags (http_flags.py)
    url = urlsplit(config.target_url)
    assert url.hostname is not None
    host = url.hostname if url.hostname.isascii() else url.hostname.encode("idna").decode()
    query = url.query
    if config.target_mode == "delay":
        rtt = f"rtt={format_duration(config.rtt)}"
        query = f"{query}&{rtt}" if query else rtt
    path = (url.path or "/") + (f"?{query}" if query else "")
    port = url.port or (443 if url.scheme == "https" else 80)
    return Target(url.scheme, host, port, path)


def request_timeout(config: RunnerConfig) -> float:
    """The most one request may take: --request-timeout, or the runner's own allowance."""
    return config.request_timeout or HTTP_TIMEOUT_SECONDS


_CONTEXTS: dict[tuple[bool, str | None], ssl.SSLContext] = {}


def ssl_context(config: RunnerConfig) -> ssl.SSLContext | None:
    """For an https target: the system's CA certificates, --tls-ca's instead, or with
    --insecure-skip-verify no check at all. None for http. One per process, as a client
    keeps one: loading the system's certificates costs tens of milliseconds of CPU
    (docs/benchmarks.md), and gevent's and asyncio's workers build their task functions within
    the task phase. Built after gevent's
    patching (the models build their tasks then), so it is gevent's context under gevent and
    Locust."""
    if not request_target(config).tls:
        return None
    key = (config.insecure_skip_verify, config.tls_ca_pem)
    context = _CONTEXTS.get(key)  # (two threads may both build one: either will do)
    if context is None:
        if config.insecure_skip_verify:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no certificates to load
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cadata=config.tls_ca_pem)
        context = _CONTEXTS.setdefault(key, context)
    return context


def reuses(config: RunnerConfig) -> bool:
    # A worker that runs one task has nothing to reuse a connection for; staying stateless
    # lets one task function serve every worker.
    return config.connection == "reuse" and not config.one_per_task


def timed_out(timeout: float) -> TimeoutError:
    return TimeoutError(f"no whole answer within {format_duration(timeout)}")
