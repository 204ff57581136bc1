"""Plain data across the split harness: the only values that pass between the candidate's process
and the tests' process. Standard library only: its source is embedded in both sandboxed programs
(they cannot import coalition_gym).

``encode`` accepts exactly None, bool, int, float, complex, str, bytes and lists, tuples, dicts, sets
and frozensets of those; the *exact* type is checked, so a subclass of int with its own ``__eq__``
is refused, not converted. ``decode`` builds fresh builtin objects from the tagged JSON and refuses
anything else, so whatever the candidate's process sends, the tests only ever compare builtins.
"""

import json

MAX_DEPTH = 64


class NotPlain(TypeError):
    """A value that is not plain data (or nests deeper than MAX_DEPTH)."""


def _check_depth(depth):
    if depth > MAX_DEPTH:
        raise NotPlain(f"nested deeper than {MAX_DEPTH}")


def _enc(value, depth):
    _check_depth(depth)
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return {"i": hex(value)}  # exact for big ints (hex has no digit limit), no bool confusion
    if kind is float:
        return {"f": repr(value)}  # keeps inf, nan and -0.0
    if kind is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is list or kind is tuple:
        return {"l" if kind is list else "t": [_enc(v, depth + 1) for v in value]}
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "z": [_enc(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in value.items()]}
    raise NotPlain(f"a value of type {kind.__module__}.{kind.__qualname__} is not plain data")


def encode(value):
    """JSON text for a plain value; NotPlain for anything else."""
    return json.dumps(_enc(value, 0), separators=(",", ":"))


def _float(text):
    if type(text) is not str:
        raise NotPlain("malformed float")
    return float(text)


def _dec(node, depth):
    _check_depth(depth)
    kind = type(node)
    if node is None or kind is bool or kind is str:
        return node
    if kind is not dict or len(node) != 1:
        raise NotPlain(f"malformed value {str(node)[:80]!r}")
    (tag, body), = node.items()
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag == "f":
        return _float(body)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(_float(body[0]), _float(body[1]))
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if type(body) is not list:
        raise NotPlain(f"malformed value {str(node)[:80]!r}")
    if tag in ("l", "t", "s", "z"):
        items = [_dec(v, depth + 1) for v in body]
        return {"l": list, "t": tuple, "s": set, "z": frozenset}[tag](items)
    if tag == "d":
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlain("malformed dict entry")
            out[_dec(pair[0], depth + 1)] = _dec(pair[1], depth + 1)
        return out
    raise NotPlain(f"unknown tag {tag!r}")


def decode(text):
    """The plain value of ``encode``'s text, built from builtins only; NotPlain if malformed."""
    try:
        return _dec(json.loads(text), 0)
    except NotPlain:
        raise
    except (TypeError, ValueError, RecursionError) as exc:  # bad JSON, unhashable keys, huge ints
        raise NotPlain(f"malformed data: {type(exc).__name__}: {str(exc)[:200]}") from None
