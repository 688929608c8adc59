"""Each corpus program behaves the same measured as plain: output, outcome, state, files.

One test per program in ``programs/`` (see harness.py for the format and the comparison).
Sequential on purpose (the machine has 2 cores); each run has a hard timeout so a hang fails one
test. ``pytest -m differential`` selects the suite.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.differential.harness import SCRATCH_ROOT, differences, load_programs

pytestmark = pytest.mark.differential

PROGRAMS = load_programs()


@pytest.fixture(scope="module", autouse=True)
def _scratch_removed_after() -> Iterator[None]:
    yield
    shutil.rmtree(SCRATCH_ROOT, ignore_errors=True)


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.name, marks=pytest.mark.timeout(p.test_timeout_s)) for p in PROGRAMS],
)
def test_measured_equals_plain(program):
    diffs = differences(program)
    assert not diffs, (
        f"{program.kind} program {program.path.name}: measured differs from plain in "
        f"{len(diffs)} observable(s):\n  " + "\n  ".join(diffs)
    )


def test_corpus_has_at_least_30_programs():
    assert len(PROGRAMS) >= 30, [p.name for p in PROGRAMS]


def test_every_setting_a_program_writes_is_read():
    """``NORMALISE += [...]`` was once skipped by the loader (only ``=`` was read): the stream
    race that line names stayed in the comparison and failed under load. Every top-level
    UPPERCASE assignment, ``=`` or ``+=``, must reach the program's settings with all its items."""
    import ast

    for program in PROGRAMS:
        written: dict[str, int] = {}
        for node in ast.parse(program.path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, node.value
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                name, value = node.target.id, node.value
            else:
                continue
            if name.isupper() and isinstance(value, ast.List):
                written[name] = written.get(name, 0) * isinstance(node, ast.AugAssign)
                written[name] += len(value.elts)
        for name, count in written.items():
            assert len(program.settings.get(name, [])) == count, (program.path.name, name)
