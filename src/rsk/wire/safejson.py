"""One reading of JSON for every file and wire input rsk parses (pure).

`loads` refuses what Python's json module would take silently or crash on: a duplicate key (json keeps
the last one), NaN and Infinity (not JSON), nesting deeper than `max_depth` (json recurses, and a deep
enough document raises RecursionError), text larger than `max_bytes`, and bytes that are not UTF-8.
Each is a BadJson, a usage error (exit 2) with a hint; a reader of rsk's own state files raises its
StateError from it (exit 6).
"""

from __future__ import annotations

import json
from itertools import accumulate
from typing import Any

from rsk.errors import UsageError

_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class BadJson(UsageError):
    code = "bad-json"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadJson(f"the key {key!r} appears twice in one object", "give each key once")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise BadJson(f"{name} is not a JSON number", "write a number, or a string")


def _depth(data: bytes) -> int:
    """How deep arrays and objects nest, counted over the text with strings left out (no recursion, and
    at C speed: escaped backslashes and quotes go first, then every other piece between quotes is text)."""
    outside = b"".join(data.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    return max(accumulate(map(_STEP.__getitem__, outside.translate(None, _NOT_BRACKETS))), default=0)


def loads(text: str | bytes, *, max_depth: int = 64, max_bytes: int | None = None) -> Any:
    """The value of a JSON text; BadJson (exit 2) for anything that is not plain, unambiguous JSON."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if max_bytes is not None and len(data) > max_bytes:
        raise BadJson(f"the JSON text is {len(data)} bytes, more than the {max_bytes} allowed", "send less")
    try:
        decoded = data.decode("utf-8") if isinstance(text, bytes) else text
        decoded.encode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise BadJson(f"the JSON text is not UTF-8 (byte {exc.start})", "write it as UTF-8") from None
    if _depth(data) > max_depth:
        raise BadJson(f"the JSON text nests deeper than {max_depth} levels", "flatten it")
    try:
        return json.loads(decoded, object_pairs_hook=_pairs, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise BadJson(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:  # unreachable after the depth check; kept so no traceback can escape
        raise BadJson(f"the JSON text nests deeper than {max_depth} levels", "flatten it") from None
