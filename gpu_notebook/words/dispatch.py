"""One sentence a record type, registered on a singledispatch wording with its record's type
checked: ``says(line_words, said.StepsSeen, lambda x: f"{x.steps} step(s) seen")``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from functools import _SingleDispatchCallable

T = TypeVar("T")
R = TypeVar("R")


def says(dispatch: _SingleDispatchCallable[R], kind: type[T], words: Callable[[T], R]) -> None:
    """Word the records of ``kind`` with ``words`` (``dispatch.register``, the type kept)."""
    dispatch.register(kind, words)
