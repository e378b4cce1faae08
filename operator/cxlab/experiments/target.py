"""workload.target: the user's own service an http workload calls instead of cxlab's delay
target (pure: types, the URL it resolves to, the runner flags it becomes, its text in plans).

A header's secret value never passes through here: a Secret key reaches the runner as an
environment variable the kubelet sets (pods.py), an `env` header locally as one cxlab run
copies (local/backend.py); the runner is told only the variable's name (--header-env)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StrictBool, StrictInt, WithJsonSchema

from cxlab.experiments.fields import LIMITS, RequestTimeout, Share, Strict, explain_pattern
from cxlab.experiments.spec.examples import SECRET, targeted
from cxlab.rules import Check, Rule
from cxlab_contract import runner_contract

CONTRACT = runner_contract()
HttpMethod = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
if set(HttpMethod.__args__) != set(CONTRACT.http_methods):  # type: ignore[attr-defined]
    raise ImportError("HttpMethod differs from runner-contract.json's httpRequest.methods")

# RFC 9110's token: what a header name may be.
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
# A header value: no line break or NUL (a request smuggled into the next line).
HEADER_VALUE_PATTERN = r"^[^\r\n\x00]*$"
MAX_HEADER_VALUE = 4096
# A Service name is a DNS-1035 label; a namespace, a Secret's or ConfigMap's name a DNS-1123
# label or subdomain; a key, what a ConfigMap's data keys may be.
SERVICE_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
PATH_PATTERN = r"^/[^\s#]*$"
URL_PATTERN = r"^https?://[^\s/?#@]+(/[^\s#]*)?(\?[^\s#]*)?$"
MAX_URL = 2048
STATUS_RANGE_PATTERN = r"^[1-5][0-9][0-9](-[1-5][0-9][0-9])?$"
DEFAULT_REQUEST_TIMEOUT = "10s"
DEFAULT_MAX_FAILURE_RATIO = 0.5
DEFAULT_OK_STATUSES = ("200-299",)
# How the runner is told where a secret header's value is: CXLAB_HEADER_<index>.
HEADER_ENV_PREFIX = "CXLAB_HEADER_"
# Where a trial Pod mounts a target's CA bundle.
CA_MOUNT = "/etc/cxlab/target-ca"
CA_FILE = "ca.crt"

for _pattern, _meaning in (
    (HEADER_NAME_PATTERN, "is not a header name: letters, digits and !#$%&'*+-.^_`|~ only"),
    (HEADER_VALUE_PATTERN, "must not hold a line break or NUL"),
    (SERVICE_NAME_PATTERN, "is not a Service name: lower-case letters, digits and '-', "
     "starting with a letter and ending with a letter or digit"),
    (NAMESPACE_PATTERN, "is not a namespace: lower-case letters, digits and '-', starting and "
     "ending with a letter or digit"),
    (OBJECT_NAME_PATTERN, "is not an object name: a DNS subdomain (lower-case letters, digits, "
     "'-' and '.')"),
    (KEY_PATTERN, "is not a key: letters, digits, '-', '_' and '.' only"),
    (ENV_NAME_PATTERN, "is not an environment variable's name: letters, digits and '_', not "
     "starting with a digit"),
    (PATH_PATTERN, "must start with / and hold no space or #"),
    (URL_PATTERN, "must be an http:// or https:// URL with a host, without spaces, user or "
     "fragment"),
    (STATUS_RANGE_PATTERN, "must be a status code (100-599) or a range such as 200-299"),
):  # fmt: skip
    explain_pattern(_pattern, _meaning)

ServiceName = Annotated[str, Field(strict=True, max_length=63, pattern=SERVICE_NAME_PATTERN)]
Namespace = Annotated[str, Field(strict=True, max_length=63, pattern=NAMESPACE_PATTERN)]
ObjectName = Annotated[str, Field(strict=True, max_length=253, pattern=OBJECT_NAME_PATTERN)]
Key = Annotated[str, Field(strict=True, max_length=253, pattern=KEY_PATTERN)]
EnvName = Annotated[str, Field(strict=True, max_length=128, pattern=ENV_NAME_PATTERN)]
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]
Path = Annotated[str, Field(strict=True, max_length=MAX_URL, pattern=PATH_PATTERN)]
HeaderValue = Annotated[
    str, Field(strict=True, max_length=MAX_HEADER_VALUE, pattern=HEADER_VALUE_PATTERN)
]
Body = Annotated[str, Field(strict=True, max_length=LIMITS["body"].max)]
_FORBIDDEN = sorted(CONTRACT.forbidden_headers)
_FORBIDDEN_CEL = "[" + ", ".join(f"'{h}'" for h in _FORBIDDEN) + "]"
HeaderName = Annotated[
    str,
    Field(strict=True, min_length=1, max_length=128, pattern=HEADER_NAME_PATTERN),
    Check(
        "is set by the runner itself or changes how the request is framed: leave it out",
        holds=lambda name: name.lower() not in CONTRACT.forbidden_headers,
        cel=f"!(self.lowerAscii() in {_FORBIDDEN_CEL})",
        found=lambda name: f"{name!r}; refused: {', '.join(_FORBIDDEN)}",
        valid="X-Host",
        invalid="Host",
    ),
]


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in CONTRACT.target_url_schemes or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, got {url!r}")
    return url


def _port_in_range(url: str) -> bool:
    """No port, or one of 1-65535 (urlsplit reads :0 as port 0, and refuses past 65535)."""
    try:
        port = urlsplit(url).port
    except ValueError:
        return False
    return port is None or 1 <= port <= 65535


_URL_PORT = "int(self.split('://')[1].split('/')[0].split('?')[0].split(':')[1])"
Url = Annotated[
    str,
    Field(strict=True, max_length=MAX_URL, pattern=URL_PATTERN),
    AfterValidator(_check_url),
    Check(
        "url's port must be 1-65535",
        holds=_port_in_range,
        cel=f"!self.matches('^https?://[^/?#]*:[0-9]+') || "
        f"({_URL_PORT} >= 1 && {_URL_PORT} <= 65535)",
        found=lambda url: f"got {url}",
        valid="http://api.example:65535/",
        invalid="http://api.example:0/",
    ),
]


def _status_range(value: int | str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    low, _, high = value.partition("-")
    return int(low), int(high or low)


def _check_status(value: int | str) -> int | str:
    if isinstance(value, str) and not re.match(STATUS_RANGE_PATTERN, value):
        raise ValueError(
            f"must be a status code (100-599) or a range such as 200-299, got {value!r}"
        )
    low, high = _status_range(value)
    if not 100 <= low <= high <= 599:
        raise ValueError(
            f"must be a status code 100-599, or a range low-high within it, got {value!r}"
        )
    return value


# Integer keywords bound an integer, string keywords a string (a CEL rule over an int-or-string
# costs the apiserver too much). That a range goes low to high is checked by cxlab alone.
_STATUS_SCHEMA = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "minimum": 100,
    "maximum": 599,
    "maxLength": 7,
    "pattern": STATUS_RANGE_PATTERN,
}
StatusCodes = Annotated[
    StrictInt | str, WithJsonSchema(_STATUS_SCHEMA), AfterValidator(_check_status)
]


def _repeated_header(headers: list[Header]) -> int | None:
    """The index of the first header whose name (any case) is listed before it."""
    names = [h.name.lower() for h in headers]
    return next((i for i, name in enumerate(names) if name in names[:i]), None)


_HTTPS = "https://api.example/"
_CA = {"name": "ca", "key": "ca.crt"}


class KeyRef(Strict):
    """One key of a Secret or ConfigMap in the experiment's namespace."""

    name: ObjectName
    """The object's name."""
    key: Key
    """The key in its data."""


class HeaderSource(Strict):
    """Where a header's value comes from: exactly one of secretKeyRef (on a cluster) or env
    (cxlab run)."""

    secret_key_ref: KeyRef | None = None
    """A key of a Secret in the experiment's namespace. The kubelet puts it in the trial
    Pod's environment; the operator never reads it (it needs no access to Secrets)."""
    env: EnvName | None = None
    """cxlab run only: the name of an environment variable of cxlab run's own; a cluster
    refuses it (the operator's environment is not yours)."""

    rules = (
        Rule(
            "valueFrom needs exactly one of secretKeyRef or env",
            holds=lambda v: (v.secret_key_ref is None) != (v.env is None),
            cel="has(self.secretKeyRef) != has(self.env)",
            valid={"workload": targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])},
            invalid={"workload": targeted(headers=[{"name": "X-A", "valueFrom": {}}])},
        ),
    )


class Header(Strict):
    """A header sent with every request: a value written here, or one kept elsewhere."""

    name: HeaderName
    """The header's name, an HTTP token. Host, Content-Length, Connection, Transfer-Encoding
    and the other headers the runner sets itself or that change the framing are refused."""
    value: HeaderValue | None = None
    """The value, in the clear: it shows in the resource, kubectl and the plan. Secrets go in
    valueFrom."""
    value_from: HeaderSource | None = None
    """A value kept secret: it reaches the runner through its environment, never its
    arguments, and shows as <from secret NAME/KEY> (or <from env VAR>)."""

    rules = (
        Rule(
            "a header needs exactly one of value or valueFrom",
            holds=lambda h: (h.value is None) != (h.value_from is None),
            cel="has(self.value) != has(self.valueFrom)",
            found=lambda h: f"header {h.name}",
            valid={"workload": targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])},
            invalid={
                "workload": targeted(headers=[{"name": "X-A", "value": "1", "valueFrom": SECRET}])
            },
        ),
    )

    def shown(self) -> str:
        """The value as plans, summaries and events may show it."""
        if self.value is not None:
            return self.value
        source = self.value_from
        assert source is not None
        if source.secret_key_ref is not None:
            return f"<from secret {source.secret_key_ref.name}/{source.secret_key_ref.key}>"
        return f"<from env {source.env}>"


class ServiceRef(Strict):
    """An in-cluster Service, called by its DNS name (name.namespace.svc)."""

    name: ServiceName
    """The Service's name."""
    namespace: Namespace | None = None
    """Its namespace; unset: the experiment's. Another namespace must be allowed by the
    cluster's admission policy (the chart's targetPolicy.namespaces)."""
    port: Port
    """The Service's port number."""
    path: Path = "/"
    """The request's path, with its query if any, e.g. /api/items?limit=10."""
    scheme: Literal["http", "https"] = "http"
    """http, or https (then see tls)."""

    def url(self, namespace: str) -> str:
        return (
            f"{self.scheme}://{self.name}.{self.namespace or namespace}.svc:{self.port}{self.path}"
        )


class CaSource(Strict):
    """A CA bundle (PEM) the target's certificate must chain to: exactly one of configMapKeyRef
    or secretKeyRef, in the experiment's namespace."""

    config_map_key_ref: KeyRef | None = None
    """A key of a ConfigMap."""
    secret_key_ref: KeyRef | None = None
    """A key of a Secret."""

    rules = (
        Rule(
            "tls.ca needs exactly one of configMapKeyRef or secretKeyRef",
            holds=lambda c: (c.config_map_key_ref is None) != (c.secret_key_ref is None),
            cel="has(self.configMapKeyRef) != has(self.secretKeyRef)",
            valid={
                "workload": targeted(url=_HTTPS, service=None, tls={"ca": {"secretKeyRef": _CA}})
            },
            invalid={
                "workload": targeted(
                    url=_HTTPS,
                    service=None,
                    tls={"ca": {"secretKeyRef": _CA, "configMapKeyRef": _CA}},
                )
            },
        ),
    )


class TargetTls(Strict):
    """How an https target's certificate is checked: against the system's CAs (the default),
    a CA bundle of yours (ca), or not at all (insecureSkipVerify: true)."""

    ca: CaSource | None = None
    """A CA bundle (PEM) instead of the system's."""
    insecure_skip_verify: StrictBool | None = None
    """Do not check the certificate at all (a test service's self-signed one)."""

    rules = (
        Rule(
            "tls: give a ca, or insecureSkipVerify: true, not both",
            holds=lambda t: t.ca is None or not t.insecure_skip_verify,
            cel="!has(self.ca) || !has(self.insecureSkipVerify) || !self.insecureSkipVerify",
            valid={
                "workload": targeted(
                    url=_HTTPS,
                    service=None,
                    tls={"ca": {"configMapKeyRef": _CA}, "insecureSkipVerify": False},
                )
            },
            invalid={
                "workload": targeted(
                    url=_HTTPS,
                    service=None,
                    tls={"ca": {"configMapKeyRef": _CA}, "insecureSkipVerify": True},
                )
            },
        ),
    )


class TargetSpec(Strict):
    """The user's own service an http workload calls: a Service in the cluster or a URL.
    Its latency is measured, not simulated: no rtt or rtts beside it."""

    service: ServiceRef | None = None
    """An in-cluster Service. Or url."""
    url: Url | None = None
    """An http:// or https:// URL. On a cluster the admission policy must allow it (the
    chart's targetPolicy.urlPatterns); cxlab run calls only loopback addresses unless
    given --allow-remote-target. Or service."""
    method: HttpMethod = "GET"
    """The request's method."""
    headers: (
        Annotated[
            list[Header],
            Field(min_length=1, max_length=CONTRACT.max_headers),
            Check(
                "a header is listed twice (names are case-insensitive)",
                holds=lambda headers: _repeated_header(headers) is None,
                cel="self.all(h, self.exists_one(g, g.name.lowerAscii() == h.name.lowerAscii()))",
                found=lambda headers: f"{headers[_repeated_header(headers) or 0].name}",
                pinpoint=lambda headers: f"[{_repeated_header(headers)}].name",
                pinpointed="[1].name",
                valid=[{"name": "X-A", "value": "1"}, {"name": "X-B", "value": "2"}],
                invalid=[{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}],
            ),
        ]
        | None
    ) = None
    """Headers sent with every request."""
    body: Body | None = None
    """The request's body (at most 64 KiB), sent with Content-Length."""
    expected_statuses: Annotated[list[StatusCodes], Field(min_length=1, max_length=16)] | None = (
        None
    )
    """The answers that count as success: codes (200) and ranges ("200-299"); unset:
    200-299. Any other answer is a failed task of kind status."""
    timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT
    """The most one request may take, connecting and reading the whole answer included;
    past it the task fails (kind timeout)."""
    tls: TargetTls | None = None
    """An https target's certificate check."""
    max_failure_ratio: Share = DEFAULT_MAX_FAILURE_RATIO
    """A trial whose share of failed requests is above this has measured the failures, not
    the service: it fails, naming the kinds of failure, and counts in no point."""

    rules = (
        Rule(
            "workload.target needs exactly one of service or url",
            holds=lambda t: (t.service is None) != (t.url is None),
            cel="has(self.service) != has(self.url)",
            valid={"workload": targeted(url="http://api.example:8080/", service=None)},
            invalid={"workload": targeted(url="http://api.example:8080/")},
        ),
        Rule(
            "tls applies to https targets: use an https url or service scheme",
            holds=lambda t: t.tls is None or t.scheme() == "https",
            cel="!has(self.tls) || (has(self.url) ? self.url.startsWith('https://') : "
            "self.service.scheme == 'https')",
            valid={
                "workload": targeted(
                    service={"name": "api", "port": 443, "scheme": "https"},
                    tls={"insecureSkipVerify": True},
                )
            },
            invalid={"workload": targeted(tls={"insecureSkipVerify": True})},
        ),
        Rule(  # a cluster's rule alone: locally the variable is cxlab run's own
            "headers[].valueFrom.env names a variable of cxlab run's own: on a cluster use "
            "valueFrom.secretKeyRef",
            holds=None,
            cel="!has(self.headers) || self.headers.all(h, !has(h.valueFrom) || "
            "!has(h.valueFrom.env))",
            valid={"workload": targeted(headers=[{"name": "X-A", "valueFrom": SECRET}])},
            invalid={
                "workload": targeted(headers=[{"name": "X-A", "valueFrom": {"env": "API_TOKEN"}}])
            },
        ),
    )

    def scheme(self) -> str:
        if self.service is not None:
            return self.service.scheme
        return urlsplit(self.url or "").scheme

    def resolved_url(self, namespace: str) -> str:
        """The URL the runners call: a Service's DNS name in `namespace` unless it names its
        own, or the url."""
        return self.service.url(namespace) if self.service is not None else str(self.url)

    def secret_headers(self) -> list[tuple[int, Header]]:
        """The headers whose value is kept elsewhere, with their index (their variable's)."""
        return [(i, h) for i, h in enumerate(self.headers or ()) if h.value_from is not None]

    def runner_flags(self) -> list[str]:
        """The runner's flags for this target (beside --target-url): never a secret value."""
        flags = ["--target-mode", "direct", "--request-timeout", self.timeout]
        if self.method != "GET":
            flags += ["--method", self.method]
        for index, header in enumerate(self.headers or ()):
            if header.value is not None:
                flags += ["--header", f"{header.name}: {header.value}"]
            else:
                flags += ["--header-env", f"{header.name}={HEADER_ENV_PREFIX}{index}"]
        if self.body is not None:
            flags += ["--body", self.body]
        if self.expected_statuses is not None:
            flags += ["--ok-status", ",".join(str(s) for s in self.expected_statuses)]
        if self.tls is not None and self.tls.insecure_skip_verify:
            flags += ["--insecure-skip-verify"]
        if self.tls is not None and self.tls.ca is not None:
            flags += ["--tls-ca", f"{CA_MOUNT}/{CA_FILE}"]
        return flags

    def describe(self, namespace: str | None = None) -> list[str]:
        """Lines for plans and summaries: where, how, and each header with secrets hidden."""
        if namespace or self.service is None:
            where = self.resolved_url(namespace or "")
        else:  # a Service before it has a namespace: as the user wrote it
            where = self.service.url("<the experiment's namespace>")
        lines = [f"{self.method} {where} (timeout {self.timeout}, fail above "
                 f"{self.max_failure_ratio:g} failed)"]  # fmt: skip
        lines += [f"  {h.name}: {h.shown()}" for h in self.headers or ()]
        if self.body is not None:
            lines.append(f"  body: {len(self.body.encode())} bytes")
        return lines


def header_environment(target: TargetSpec | None) -> dict[str, Any]:
    """Each secret header's variable and where its value comes from: {name: KeyRef or env}."""
    if target is None:
        return {}
    return {
        f"{HEADER_ENV_PREFIX}{i}": h.value_from.secret_key_ref or h.value_from.env  # type: ignore[union-attr]
        for i, h in target.secret_headers()
    }
