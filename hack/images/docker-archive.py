#!/usr/bin/env python3
"""Pack layer tarballs into a docker-archive (docker save format) that
`ctr images import` loads: manifest.json, the image config and one folder per layer.

    docker-archive.py -o image.tar --tag cxlab.dev/pause:dev --user 65532:65532 \
        --env PATH=/usr/bin --layer base.tar --layer app.tar

Standard library only; the output depends only on the inputs (no timestamps).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

EPOCH = "1970-01-01T00:00:00Z"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--tag", required=True, help="for example cxlab.dev/runner:dev")
    parser.add_argument(
        "--layer", type=Path, action="append", required=True, help="uncompressed tar, bottom first"
    )
    parser.add_argument("--user", default="")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE")
    parser.add_argument(
        "--entrypoint", action="append", default=[], help="one argv element per flag"
    )
    parser.add_argument(
        "--cmd", action="append", default=[], help="default arguments, one argv element per flag"
    )
    args = parser.parse_args()

    diff_ids = [sha256_file(layer) for layer in args.layer]
    container_config: dict[str, object] = {"Env": args.env}
    if args.user:
        container_config["User"] = args.user
    if args.workdir:
        container_config["WorkingDir"] = args.workdir
    if args.entrypoint:
        container_config["Entrypoint"] = args.entrypoint
    if args.cmd:
        container_config["Cmd"] = args.cmd
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": EPOCH,
        "config": container_config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [
            {"created": EPOCH, "created_by": f"cxlab hack/images: {layer.name}"}
            for layer in args.layer
        ],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_names = [f"{d}/layer.tar" for d in diff_ids]
    manifest = [{"Config": config_name, "RepoTags": [args.tag], "Layers": layer_names}]

    tmp = args.output.with_suffix(".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, config_name, config_bytes)
        for layer, name in zip(args.layer, layer_names, strict=True):
            info = tar.gettarinfo(str(layer), arcname=name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with layer.open("rb") as f:
                tar.addfile(info, f)
        add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
    tmp.replace(args.output)


if __name__ == "__main__":
    main()
