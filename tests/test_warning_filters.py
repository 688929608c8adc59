"""Our imports leave no warning filters behind, whatever the cell does (gpu_notebook.hygiene).

bokeh adds ``simplefilter("always", ...)`` entries for its own warning classes when imported;
the warm-up imports run on a thread beside the user's first cells, and a ``catch_warnings``
block the user's cell was in (torch's import is one) restores, on exit, the list it saved on
entry: bokeh's filters come back after our thread took them out. The measured cell's end takes
them out again; a cell that does not compile, or whose options are bad, never reached that end
(the differential suite's syntax-error notebook read them under load). The race is replayed
here step by step, on the real shell, with a warning class of a package we imported first.
"""

from __future__ import annotations

import warnings

import pytest

from gpu_notebook import hygiene

# A warning class as bokeh's are: its module is a package hygiene counts as imported by us.
OursWarning = type("BokehUserWarning", (UserWarning,), {"__module__": "bokeh.util.warnings"})


def _ours_in_filters() -> list[object]:
    return [f for f in warnings.filters if f[2] is OursWarning]


def _replay_the_race(monkeypatch) -> None:
    """bokeh's filter added (the warm thread's import), a catch_warnings entered on the user's
    thread (its saved list holds it), the warm thread's sweep, then the block's exit."""
    monkeypatch.setattr(hygiene, "_FIRST_IMPORTED_BY_US", {*hygiene._FIRST_IMPORTED_BY_US, "bokeh"})
    warnings.simplefilter("always", OursWarning)
    with warnings.catch_warnings():
        hygiene.sweep()
        assert not _ours_in_filters()
    assert _ours_in_filters()  # put back by the block's exit: the race's outcome


@pytest.mark.parametrize(
    "cell",
    [
        "%%gpucheck -q\nfor step in range(3)\n    x = 1\n",  # does not compile
        "%%gpucheck --no-such-option\nx = 1\n",  # bad options
        "%%gpucheck -h\nx = 1\n",  # help: nothing runs
    ],
    ids=["syntax-error", "bad-options", "help"],
)
def test_a_cell_that_never_runs_still_takes_our_filters_back(ip, monkeypatch, cell):
    try:
        _replay_the_race(monkeypatch)
        ip.run_cell(cell)
        assert not _ours_in_filters()
    finally:
        warnings.filters[:] = [f for f in warnings.filters if f[2] is not OursWarning]


def test_a_users_own_filter_for_a_package_they_imported_stays(ip):
    # A warning class of a package the user imported first: its filters are theirs.
    theirs = type("TheirWarning", (UserWarning,), {"__module__": "their_package.warnings"})
    warnings.simplefilter("always", theirs)
    try:
        ip.run_cell("%%gpucheck -q\nfor step in range(3)\n    x = 1\n")
        assert any(f[2] is theirs for f in warnings.filters)
    finally:
        warnings.filters[:] = [f for f in warnings.filters if f[2] is not theirs]
