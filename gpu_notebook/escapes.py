"""Text from a trace or the user, made safe for a terminal: every control character escaped.

An operator name, a file name or an exception message can hold ESC sequences (clear the screen,
set the window title, move the cursor over the verdict), a newline that forges a report line, a
C1 control (``\\x9b`` is CSI on many terminals), or a bidi override that shows text reversed.
The text views print such strings escaped as Python would write them (``\\x1b``), as the HTML
view escapes markup. Imports nothing of the package: every stage may use it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")

# C0 controls, DEL, C1 controls, the line/paragraph separators, the bidi embedding / override /
# isolate / mark characters, and lone surrogates (an undecodable file name from os.listdir).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_UNSAFE_KEEP_NEWLINES = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    char = m.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u202e``).

    ``newlines=True`` keeps ``\\n`` (a whole rendered report); otherwise the result is one line.
    """
    pattern = _UNSAFE_KEEP_NEWLINES if newlines else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def printable_record(value: T) -> T:
    """A copy of a record (frozen dataclasses, tuples, dicts) whose every string is one safe line.

    What a text view renders from: a name can then forge no line and move no cursor. Fields that
    hold no string by their type (timings, counts) are not walked; an unchanged part is shared.
    """
    return typing.cast(T, _walk(value))


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for name in _text_fields(type(value)):
            old = getattr(value, name)
            new = _walk(old)
            if new is not old:
                changes[name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, (tuple, list)):
        items = [_walk(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(_walk(k), _walk(v)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value


@functools.cache
def _text_fields(cls: type) -> tuple[str, ...]:
    """The fields of dataclass ``cls`` whose declared type may hold a string somewhere inside."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable hint: walk every field (safe, slower)
        return tuple(f.name for f in dataclasses.fields(cls))
    return tuple(
        f.name for f in dataclasses.fields(cls) if _may_hold_text(hints.get(f.name, Any), set())
    )


def _may_hold_text(hint: Any, seen: set[int]) -> bool:
    if hint is str or hint is Any or hint is object:
        return True
    if id(hint) in seen:
        return False
    seen.add(id(hint))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        try:
            inner = typing.get_type_hints(hint)
        except Exception:  # noqa: BLE001 - unresolvable: assume it may
            return True
        return any(_may_hold_text(h, seen) for h in inner.values())
    origin = typing.get_origin(hint)
    if origin is typing.Literal:  # our own fixed words (msgspec rejects any other on decode)
        return False
    args = typing.get_args(hint)
    if origin is None and not args:
        return not isinstance(hint, type) or hint not in (int, float, bool, type(None), bytes)
    if origin is typing.Union or origin is types.UnionType:
        return any(_may_hold_text(a, seen) for a in args)
    return any(_may_hold_text(a, seen) for a in args if a is not Ellipsis)
