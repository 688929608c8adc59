"""The package's names and what its comments cite: no module shadows the standard library, and
every file or module of this repository a docstring or comment names is there.

A module named like a standard one (``compile``, ``input``, ``logging``, ``trace``, ``html``)
is the standard one's name for whoever runs a file of its folder as a script, and reads as it
to a newcomer; a comment that cites ``rules/interference.py`` after that module went sends the
reader to nothing. Paths into other projects (``torch/nn/modules/module.py``,
``hta/analyzers/breakdown_analysis.py``) are the anchors' files and are not checked.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpu_notebook"

# A cited path: folders and a file with an extension (``capture/nvml.py``, ``docs/x.md``), or a
# document named in capitals (``DESIGN.md``, ``README.md``).
_EXT = r"(?:py|md|toml|json|gz|ts|js|css|html|ipynb|txt|yml|cfg)\b"
_PATH = re.compile(rf"(?<![\w./-])((?:[\w-]+/)+[\w.-]*\w\.{_EXT}|[A-Z][A-Z_]+\.md\b)")
# A module cited by its stage's folder without ``.py`` (``analysis/run_trend``, ``cell/setup.flags``).
_STAGE_MODULE = re.compile(rf"(?<![\w./-])([a-z_]+)/(\w+)\b(?![/-]|\.{_EXT})")
# A cited module: ``gpu_notebook.views.text`` (and what follows it: a function, a class).
_MODULE = re.compile(r"\bgpu_notebook(?:\.\w+)+")


def _tracked() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def _sources() -> list[Path]:
    return [*sorted(PACKAGE.rglob("*.py")), ROOT / "README.md"]


def prose(path: Path) -> str:
    """What a reader reads in ``path``: a module's comments and its strings with a space in
    them (docstrings, messages; ``"gpu_notebook.insert_cell"`` is a name, not a cite); all of a
    document."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    parts = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and " " in tok.string):
            parts.append(tok.string)
    return "\n".join(parts)


# The package's folders: ``capture/...`` in a comment is ours.
_STAGES = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")}
_INITS = sorted(PACKAGE.rglob("__init__.py"))


def _ours(cited: str) -> list[Path] | None:
    """Where a cited path of this repository would be; None: a path of another project."""
    first = cited.split("/", 1)[0]
    if "/" not in cited:
        return [ROOT / cited, *(p.parent / cited for p in _INITS)]
    if (ROOT / first).is_dir() or first in {"gpu_notebook", "tests", "benchmarks", "docs"}:
        return [ROOT / cited]
    if (PACKAGE / first).is_dir():  # a stage of the package: rules/, capture/, ...
        return [PACKAGE / cited]
    return None


def missing_paths(text: str, tracked: set[str]) -> list[str]:
    """The paths of this repository ``text`` cites that are not in it."""
    missing = []
    for cited in _PATH.findall(text):
        places = _ours(cited)
        if places is None:
            continue
        if not any(
            str(p.relative_to(ROOT)) in tracked or p.is_dir()
            for p in places
            if p.is_relative_to(ROOT)
        ):
            missing.append(cited)
    for stage, name in _STAGE_MODULE.findall(text):
        folder = PACKAGE / stage
        if stage in _STAGES and not ((folder / f"{name}.py").is_file() or (folder / name).exists()):
            missing.append(f"{stage}/{name}")
    return missing


def _top_names(init: Path) -> set[str]:
    """The names a package's ``__init__`` binds (what ``package.name`` may cite)."""
    names: set[str] = set()
    if not init.is_file():
        return names
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    for node in ast.walk(ast.parse(init.read_text())):  # what it exports lazily (__getattr__)
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return names


def missing_module(dotted: str) -> str | None:
    """``dotted``'s first part that is neither a module of the package nor a name its package
    binds; None when the module it cites is there (a name inside a module is not checked)."""
    here = ROOT
    for part in dotted.split("."):
        if part.startswith("__"):  # __version__, __file__
            return None
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file() or part in _top_names(here / "__init__.py"):
            return None
        else:
            return part
    return None


def test_the_checks_see_a_missing_path_and_module_and_leave_other_projects_alone():
    tracked = _tracked()
    text = (
        "named by the saturation finding (rules/interference.py), see DESIGN.md and "
        "capture/nvml.py, analysis/run_trend and fixes/backend_flags (cell/setup.flags reads "
        "them); torch/nn/modules/module.py and hta/analyzers/breakdown_analysis.py"
    )
    assert missing_paths(text, tracked) == [
        "rules/interference.py",
        "DESIGN.md",
        "fixes/backend_flags",
    ]
    assert missing_module("gpu_notebook.views.nothing_here") == "nothing_here"
    assert missing_module("gpu_notebook.views.text.render_text") is None
    assert missing_module("gpu_notebook.traces.load_trace") is None
    assert missing_module("gpu_notebook.fixes.apply_fix") is None  # exported lazily


def test_no_module_shadows_the_standard_library():
    """The package's modules and packages, and the scripts of benchmarks/ and tests/ (run from
    their folder, where ``import trace`` would find a ``trace.py`` beside them)."""
    stdlib = set(sys.stdlib_module_names)
    package = {
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*")
        if p.is_dir() and (p / "__init__.py").is_file() and p.name in stdlib
    }
    scripts = {f for f in _tracked() if f.endswith(".py") and Path(f).stem in stdlib}
    shadowing = sorted(package | scripts)
    assert not shadowing, f"named like a standard module: name it for its job: {shadowing}"


def test_every_repository_path_a_comment_cites_is_in_the_repository():
    tracked = _tracked()
    missing = {
        f"{path.relative_to(ROOT)}: {cited}"
        for path in _sources()
        for cited in missing_paths(prose(path), tracked)
    }
    assert not missing, sorted(missing)


def test_every_module_a_comment_cites_is_in_the_package():
    missing = {
        f"{path.relative_to(ROOT)}: {dotted}"
        for path in _sources()
        for dotted in _MODULE.findall(prose(path))
        if missing_module(dotted) is not None
    }
    assert not missing, sorted(missing)


def _layout() -> dict[str, list[str]]:
    """README's layout block, gpu_notebook's part: each entry's lines by its name (``capture/``,
    ``records.py``; ``""`` for the package's own top-level lines)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, list[str]] = {}
    current = None
    for line in block.splitlines():
        if line.startswith("gpu_notebook/"):
            current = ""
        elif line and not line.startswith(" "):
            current = None  # labextension/, benchmarks/, tests/: not the package
        elif current is not None and line.startswith("  ") and not line.startswith("   "):
            name = line.split()[0].rstrip(",")
            current = name if name.endswith("/") else ""
        if current is not None:
            entries.setdefault(current, []).append(line)
    return entries


def test_readme_layout_names_every_package_and_top_level_module_and_only_those_there():
    entries = _layout()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert {e.rstrip("/") for e in entries if e} == packages
    top = " ".join(entries[""])
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    unnamed = {m for m in modules if not re.search(rf"\b{m}\b", top)}
    assert not unnamed, f"top-level modules README's layout does not name: {unnamed}"
    named = {
        f"{entry}{name}"
        for entry, lines in entries.items()
        for name in re.findall(r"(?<![/\w])(\w+\.py)\b", " ".join(lines))
        if not (PACKAGE / entry / name).is_file()
    }
    assert not named, f"README's layout names modules that are not there: {named}"


def test_capture_is_forbidden_every_module_but_those_it_stands_on():
    """pyproject's "Capture stands on the records only" names every package and top-level
    module but the ones capture stands on, so a module added later is forbidden to it too."""
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = (
        c for c in config["contracts"] if c["name"] == "Capture stands on the records only"
    )
    stands_on = {"capture", "records", "markers", "formatting", "escapes", "__init__", "__main__"}
    everything = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    forbidden = {m.removeprefix("gpu_notebook.") for m in contract["forbidden_modules"]}
    assert everything - stands_on - forbidden == set()
