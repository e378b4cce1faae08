#!/usr/bin/env python3
"""Print the pinned requirements of one image, one per line: the package names listed for it
under [tool.cxlab.images] in pyproject.toml, at the versions pinned in [project] dependencies.
The single source of the images' Python packages: hack/images.sh, operator/Containerfile and
workloads/Containerfile all install what this prints.

    python3 hack/image-requirements.py runner|operator [pyproject.toml]
    python3 hack/image-requirements.py service:httpbin [pyproject.toml]   (a service under test's)
"""

import re
import sys
import tomllib
from pathlib import Path
from typing import Any


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_requirements(pyproject: dict[str, Any], image: str) -> list[str]:
    images = pyproject["tool"]["cxlab"]["images"]
    if image not in images:
        raise SystemExit(f"pyproject.toml: no image {image!r} under [tool.cxlab.images]")
    pins = {
        normalize(re.split(r"[=<>!~\[; ]", dep, maxsplit=1)[0]): dep
        for dep in pyproject["project"]["dependencies"]
    }
    lines = []
    for name in images[image]:
        pin = pins.get(normalize(name))
        if pin is None:
            raise SystemExit(f"pyproject.toml: {name} (image {image}) is not a dependency")
        if "==" not in pin:
            raise SystemExit(f"pyproject.toml: {pin} is not pinned with ==")
        lines.append(pin)
    return lines


def service_requirements(pyproject: dict[str, Any], service: str) -> list[str]:
    """A service under test's pins ([tool.cxlab.services]): its own, not cxlab's."""
    services = pyproject["tool"]["cxlab"]["services"]
    if service not in services:
        raise SystemExit(f"pyproject.toml: no service {service!r} under [tool.cxlab.services]")
    unpinned = [pin for pin in services[service] if "==" not in pin]
    if unpinned:
        raise SystemExit(f"pyproject.toml: {', '.join(unpinned)} not pinned with ==")
    return list(services[service])


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    path = Path(sys.argv[2]) if len(sys.argv) == 3 else Path(__file__).parents[1] / "pyproject.toml"
    with path.open("rb") as f:
        pyproject = tomllib.load(f)
    name = sys.argv[1]
    if name.startswith("service:"):
        print("\n".join(service_requirements(pyproject, name.removeprefix("service:"))))
    else:
        print("\n".join(image_requirements(pyproject, name)))


if __name__ == "__main__":
    main()
