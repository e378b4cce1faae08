#!/usr/bin/env python3
"""Writes operator/cxlab/placement-schema.json: core/v1 Toleration and Affinity from the
OpenAPI document of the Kubernetes this project builds (k8s.io/kubernetes in hack/k8s/go.mod,
from the Go module cache; `go mod download` fetches it when missing). `make placement-schema`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
from cxlab.placement import SCHEMA_FILE, extract  # noqa: E402


def openapi_document() -> dict:
    found = subprocess.run(
        ["go", "mod", "download", "-json", "k8s.io/kubernetes"],
        cwd=ROOT / "hack" / "k8s", check=True, capture_output=True, text=True,
    )  # fmt: skip
    module = Path(json.loads(found.stdout)["Dir"])
    return json.loads((module / "api/openapi-spec/v3/api__v1_openapi.json").read_text())


if __name__ == "__main__":
    out = ROOT / "operator" / "cxlab" / SCHEMA_FILE
    out.write_text(json.dumps(extract(openapi_document()), indent=1, sort_keys=True) + "\n")
    print(out)
