"""Reading a user's file without trusting it: YAML (experiments) and JSON (result.json, or
`kubectl get cx -o json` on stdin), each bounded in size, nesting and (for YAML's aliases)
expanded size, so no input makes the CLI crash, hang or swell; every refusal is one line.

The limits and their reasons:
- 256 KiB per file: `kubectl apply` keeps a copy of what it applies in the
  last-applied-configuration annotation, and a resource's annotations may hold 256 KiB in all;
  a larger experiment could not be applied to a cluster either. A result.json holds a status
  (up to etcd's 1.5 MiB object size), so JSON may be 3 MiB, the apiserver's request limit.
- 64 levels of nesting: an experiment needs at most 14 (a Pod affinity term).
- 100,000 nodes after aliases are expanded: a YAML "billion laughs" fits in a few hundred
  bytes and expands past any memory; go-yaml, which kubectl uses, refuses "excessive
  aliasing" the same way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 256 * 1024
MAX_JSON_BYTES = 3 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 100_000
TOO_DEEP = f"nests deeper than {MAX_DEPTH} levels; the deepest experiment needs 14"


class InputError(Exception):
    """A file that cannot be read as what it should be: one line saying why."""


def _read(path: Path | None, limit: int, why: str) -> str:
    """The text of a file (None: stdin), refused past limit bytes or when not UTF-8."""
    try:
        if path is None:
            raw = sys.stdin.buffer.read(limit + 1)
        elif path.is_dir():
            raise InputError("is a directory; expected a file")
        else:
            with path.open("rb") as stream:  # read at most the limit: /dev/zero ends here too
                raw = stream.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}") from None
    if len(raw) > limit:
        raise InputError(f"is larger than {limit // 1024} KiB, the most accepted ({why})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"is not UTF-8 text (byte {error.start} is {raw[error.start]:#04x}): "
            f"expected YAML or JSON"
        ) from None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def _check_size(root: yaml.Node) -> None:
    """Depth and node count of a composed document, aliases expanded (a node reachable
    twice counts twice), without expanding anything; and no key twice in a mapping."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise InputError(
                f"expands to more than {MAX_NODES:,} values (YAML aliases repeating "
                f"aliases?); an experiment needs a few hundred"
            )
        if depth > MAX_DEPTH:
            raise InputError(TOO_DEEP)
        if isinstance(node, yaml.SequenceNode):
            stack += [(child, depth + 1) for child in node.value]
        elif isinstance(node, yaml.MappingNode):
            keys = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in keys:
                        # PyYAML keeps the last; kubectl refuses it, and so do we.
                        raise InputError(
                            f"line {key.start_mark.line + 1}: key {key.value!r} appears twice "
                            f"in one mapping"
                        )
                    keys.add(key.value)
                stack += [(key, depth + 1), (value, depth + 1)]


def load_yaml_documents(path: Path) -> list[Any]:
    """Every document of a YAML file (as `kubectl apply -f` reads several), empty ones left
    out; InputError says what is wrong with the file."""
    text = _read(
        path, MAX_YAML_BYTES, "kubectl apply keeps a copy in an annotation limited to 256 KiB"
    )
    documents = []
    try:
        loader = yaml.SafeLoader(text)  # reads the first characters already
    except yaml.YAMLError as error:
        raise InputError(f"is not valid YAML: {_one_line(error)}") from None
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_size(node)
            document = loader.construct_document(node)
            if document is not None:
                documents.append(document)
    except yaml.YAMLError as error:
        raise InputError(f"is not valid YAML: {_one_line(error)}") from None
    except RecursionError:
        raise InputError(TOO_DEEP) from None
    finally:
        loader.dispose()
    return documents


def load_json_document(path: Path | None) -> dict[str, Any]:
    """A JSON object from a file, or stdin when path is None."""
    text = _read(path, MAX_JSON_BYTES, "the apiserver's request limit")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"is not valid JSON: {error}") from None
    except RecursionError:
        raise InputError(f"nests deeper than JSON can be read ({MAX_DEPTH} levels)") from None
    if not isinstance(document, dict):
        raise InputError(f"holds a JSON {type(document).__name__}; expected an object")
    return document
