"""A spawned child's function that never imports torch (spawn needs it in a module)."""

from __future__ import annotations

import sys


def meta_path_to(path: str) -> None:
    """Writes what the child's ``sys.meta_path`` holds after its work: its finders' types."""
    import json

    finders = [f"{type(f).__module__}.{type(f).__qualname__}" for f in sys.meta_path]
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"finders": finders, "torch": "torch" in sys.modules}, out)
