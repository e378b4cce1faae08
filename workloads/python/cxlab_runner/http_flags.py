"""The http workload's flags (workloads/CONTRACT.md, Flags): the target, the request's
headers (a --header-env secret never in a message), its body and TLS, checked into
RunnerConfig's fields; each one refused for another workload."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any
from urllib.parse import quote, urlsplit

from cxlab_contract import runner_contract
from cxlab_runner.flags import DEFAULT_OK_STATUS, UsageError, ok_statuses

# The flags that shape an http request (CONTRACT.md, Flags), with their defaults: any of them
# set for another workload is a usage error.
HTTP_ONLY: dict[str, object] = {
    "target-mode": "delay",
    "method": "GET",
    "header": None,
    "header-env": None,
    "body": "",
    "ok-status": DEFAULT_OK_STATUS,
    "request-timeout": 0.0,
    "tls-ca": None,
    "insecure-skip-verify": False,
}

# (and obs-text, bytes 0x80-0xFF), never a control character such as a line break.
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


def _header_name(flag: str, name: str) -> str:
    """A --header or --header-env name: a token, and none the runner sets itself."""
    if not _TOKEN.fullmatch(os.fsencode(name)):
        raise UsageError(f"--{flag}: {name!r} is not a header name (an RFC 9110 token)")
    if name.lower() in runner_contract().forbidden_headers:
        raise UsageError(
            f"--{flag}: the runner sets {name} itself, or it changes the framing "
            f"(not one of {', '.join(sorted(runner_contract().forbidden_headers))})"
        )
    return name


def _headers(literal: list[str], from_env: list[str]) -> tuple[tuple[str, bytes], ...]:
    """--header 'Name: value' and --header-env 'Name=VAR' (the value of the environment
    variable VAR, which no message ever shows), one line per name: a name given twice is sent
    once, its values joined by ", " as RFC 9110 5.3 combines a list field."""
    most = runner_contract().max_headers
    if len(literal) + len(from_env) > most:
        raise UsageError(
            f"--header and --header-env: {len(literal) + len(from_env)} headers, at most {most}"
        )
    lines: list[tuple[str, bytes]] = []
    for text in literal:
        name, colon, value = text.partition(":")
        if not colon:
            raise UsageError(f"--header {text!r}: want 'Name: value'")
        raw = os.fsencode(value).strip(b" \t")
        if not _FIELD_VALUE.fullmatch(raw):
            raise UsageError(
                f"--header {_header_name('header', name)}: its value holds a control "
                "character (a line break?), which a header value cannot"
            )
        lines.append((_header_name("header", name), raw))
    for text in from_env:
        name, equals, variable = text.partition("=")
        if not equals or not variable:
            raise UsageError(f"--header-env {text!r}: want 'Name=VAR' (an environment variable)")
        name = _header_name("header-env", name)
        secret = os.environ.get(variable, "")
        if not secret:
            state = "empty" if variable in os.environ else "unset"
            raise UsageError(f"--header-env {name}={variable}: the environment variable is {state}")
        raw = os.fsencode(secret).strip(b" \t")
        if not raw or not _FIELD_VALUE.fullmatch(raw):
            raise UsageError(
                f"--header-env {name}={variable}: the variable's value holds a control "
                "character (a line break?) or only spaces, which a header value cannot"
            )
        lines.append((name, raw))
    combined: dict[str, tuple[str, list[bytes]]] = {}
    for name, raw in lines:
        combined.setdefault(name.lower(), (name, []))[1].append(raw)
    return tuple((name, b", ".join(values)) for name, values in combined.values())


def _tls_ca(path: str) -> str:
    """--tls-ca: the PEM text of the CA certificates, read once and checked here, so a bad
    file is a usage error and not a failed task each time."""
    import ssl  # here, not at the top: gevent patches ssl after the flags are read

    try:
        with open(path, "rb") as file:
            pem = file.read().decode("ascii")
    except OSError as error:
        raise UsageError(f"--tls-ca {path}: cannot read it ({error.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--tls-ca {path}: not a PEM file (not text)") from None
    try:
        ssl.create_default_context(cadata=pem)
    except (ssl.SSLError, ValueError) as error:
        raise UsageError(f"--tls-ca {path}: no PEM CA certificate in it ({error})") from None
    return pem


def http_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The http flags, checked, as RunnerConfig's fields; refused for other workloads."""
    if args.workload != "http":
        # (argparse parses a default given as text: --ok-status's is a set of codes)
        defaults = {**HTTP_ONLY, "ok-status": ok_statuses(DEFAULT_OK_STATUS)}
        for flag, default in defaults.items():
            if getattr(args, flag.replace("-", "_")) != default:
                raise UsageError(f"--{flag} applies to the http workload only")
        return {}
    if not args.target_url:
        raise UsageError("--target-url is required for the http workload")
    url = urlsplit(args.target_url)
    schemes = runner_contract().target_url_schemes
    try:
        port_ok = url.port is None or url.port >= 0  # raises ValueError out of 0-65535
    except ValueError:
        port_ok = False
    if url.scheme not in schemes or not url.hostname or not port_ok:
        raise UsageError(
            f"--target-url must be an {' or '.join(f'{s}://' for s in schemes)} URL with a "
            f"host (and a port 0-65535), got {args.target_url!r}"
        )
    if url.username is not None or url.password is not None:
        raise UsageError(
            "--target-url: no user or password in the URL (they would be in the runner's "
            "arguments): send them with --header-env Authorization=VAR"
        )
    tls = url.scheme == "https"
    if args.tls_ca and args.insecure_skip_verify:
        raise UsageError("--insecure-skip-verify checks no certificate: leave --tls-ca out")
    for flag in ("tls-ca", "insecure-skip-verify"):
        if getattr(args, flag.replace("-", "_")) and not tls:
            raise UsageError(f"--{flag} applies to an https:// --target-url only")
    body = os.fsencode(args.body)
    most = runner_contract().limits["body"].max
    if len(body) > most:
        raise UsageError(f"--body is {len(body)} bytes: at most {most}")
    # Percent-encode what a request line cannot carry (spaces, non-ASCII), as Go's URL does;
    # an escape already there stays.
    safe = "!#$%&'()*+,/:;=?@[]~"
    target_url = url._replace(path=quote(url.path, safe), query=quote(url.query, safe)).geturl()
    return {
        "target_url": target_url,
        "target_mode": args.target_mode,
        "method": args.method,
        "headers": _headers(args.header or [], args.header_env or []),
        "body": body,
        "ok_statuses": args.ok_status,
        "request_timeout": args.request_timeout,
        "tls_ca_pem": _tls_ca(args.tls_ca) if args.tls_ca else None,
        "insecure_skip_verify": args.insecure_skip_verify,
    }
