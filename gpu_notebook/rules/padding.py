"""Compute spent on padding: batches padded to a fixed length where their rows are much shorter.

The rule, its message record and its fix in one place; its wording is ``words/padding.py`` and
its test ``tests/test_rule_padding.py`` (rules/__init__ finds the module and its ``FIX``).

Evidence: the first batches the loop read (capture/padding.py, on CPU tensors only): each
batch's padded length, its longest row and its real tokens, from the ``attention_mask`` where
the batch has one, else from the token ids' trailing runs of one value (taken as padding where
every row of every batch read ends in the same columns of it, past the batch's longest row).
Padding every batch to its own longest row keeps each row and its mask: the model computes on
``longest`` columns instead of ``length``.

Gain: the share of the step that scales with sequence length is forward and backward (the data
wait and the optimizer step do not; nor, for the low end, the steps' wait for a core). Its linear part (embeddings, projections, MLPs, the loss)
shrinks as the kept columns' share ``r1`` and attention's scores as ``r2`` (the squares'): the low
end takes the least forward+backward share read and linear scaling alone; the high end the
most of the step outside data and optimizer, all of it scaling as the squares (an upper bound:
a small model's step does not shrink in proportion at short lengths). On a GPU the step shrinks
with the kernels' busy share, and only a GPU-bound step is sure to (no low end otherwise).
Unseen round 12 (hf_pad_max_length, BERT on CPU, 256 columns for 12-48 tokens): 10.4x by hand.

Fix: pad to the longest row of each batch where the batches are padded, when the cell shows that
place feeds the loader the loop reads (issue 26 item 1): the collate function passed as
``collate_fn=``/``data_collator=`` whose length constant is the padded length read (the constant
replaced by the batch's longest, the constant kept as a cap), a tokenizer call there with
``padding="max_length"`` (made ``"longest"``), or a ``DataCollatorWithPadding(padding=
"max_length")`` given to the loader or Trainer. Elsewhere (a dataset tokenized whole before the
loop, a collate the cell does not define): a refusal that names the place to change.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.cell.blocks import int_constants
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, keyword_value
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, PaddingReading, Run, Said, Severity
from gpu_notebook.rules.common import (
    found,
    gain_range,
    gpu_busy_bounds,
    severity_of,
    share_range,
    uses_compile,
)

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.cell.tree import CellTree
    from gpu_notebook.fixes.cst_tools import CodemodResult

# Kept columns' share at or above this: padding costs too little to name (a fifth of the step's
# length-scaled work at most).
KEPT_MAX = 0.8
# Token ids read as padded only with this many columns past every batch's longest row (fewer
# could be the end of real text that happens to share a token).
IDS_MIN_PAD_COLUMNS = 8
_SCALING = ("forward", "backward")
_NOT_SCALING = ("data", "optimizer")
_COLLATE_KEYWORDS = frozenset({"collate_fn", "data_collator"})
_MAX_LENGTH = "max_length"
_TOKENIZER_ENDINGS = ("tokenizer", "tok", "encode_plus", "batch_encode_plus")


@dataclass(frozen=True)
class PaddedTokens(Said):
    """The loop's batches are padded far past their longest row."""

    batches: int  # batches read
    length: int  # the padded length (the most common of those read)
    longest: int  # the longest row seen in any batch read
    real_share: float  # real tokens of all the columns computed
    kept_share: float  # columns padding to each batch's longest would keep (r1)
    field: str  # where it was read: "attention_mask", "input_ids", "batch[0]"
    pad_value: int | None  # the token id the rows pad with (None: read from a mask)
    on_device: int  # batches not read: their tensors were on a device already
    scaling_low: float | None  # the least share of the step that scales with length
    waited: float  # the steps' wall time their thread waited for a core (in scaling_low's whole)
    scaling_high: float | None  # the most
    gpu: bool
    low: float | None
    bound: float | None
    # Where the cell pads (None: nowhere the cell shows): its line, and the collate's name or
    # the call's line of text.
    site_line: int | None
    site: str | None
    site_is_collate: bool
    compiled: bool  # the cell compiles the model: each new length compiles again
    # A partial GPU timeline (``GpuBusyBounds``): the kernels' share is known only between the
    # clocked events' (``scaling_low``'s grade) and NVML's (``scaling_high``; None: not measured).
    unclocked_events: int = 0


@dataclass(frozen=True)
class PadSite:
    """A place the cell pads to a fixed length."""

    kind: Literal["collate", "tokenizer", "collator"]
    node: ast.AST  # the collate's def, or the tokenizer / collator call
    line: int
    reaches: bool  # given to the loader or Trainer the loop reads (as collate_fn/data_collator)
    constant: ast.AST | None = None  # collate: the length's name or literal (a node of its)
    longest: str | None = None  # collate: its rows' lengths, a generator expression's text


def tokens_kept(reading: PaddingReading) -> tuple[float, float, float, int, int] | None:
    """(r1, r2, real share, padded length, longest) over the batches read; None: none read."""
    batches = reading.batches
    if not batches:
        return None
    slots = sum(b.rows * b.length for b in batches)
    if slots <= 0:
        return None
    r1 = sum(b.rows * b.longest for b in batches) / slots
    r2 = sum(b.rows * b.longest**2 for b in batches) / sum(b.rows * b.length**2 for b in batches)
    lengths = [b.length for b in batches]
    length = max(set(lengths), key=lengths.count)
    return r1, r2, sum(b.real for b in batches) / slots, length, max(b.longest for b in batches)


def padded_ids(reading: PaddingReading) -> bool:
    """Token ids read as padded: every batch read ends in the same value, in every row, over at
    least ``IDS_MIN_PAD_COLUMNS`` columns (a mask says it itself)."""
    batches = reading.batches
    if all(b.pad_value is None for b in batches):
        return True
    if len({b.pad_value for b in batches}) != 1:
        return False
    return all(b.length - b.longest >= IDS_MIN_PAD_COLUMNS for b in batches)


def padded_tokens(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The batches the loop read are padded to a length far above their longest row."""
    reading = run.steps.padding
    if reading is None:
        return None
    kept = tokens_kept(reading)
    if kept is None or not padded_ids(reading):
        return None
    r1, r2, real, length, longest = kept
    if r1 >= KEPT_MAX:
        return None
    gpu = analysis.gpu is not None
    low_share, high_share = _scaling(analysis)
    removed_low = None if low_share is None else low_share * (1 - r1)
    removed_high = None if high_share is None else high_share * (1 - r2)
    low, bound = gain_range(removed_low, removed_high, analysis, host_side=False)
    first = reading.batches[0]
    waited = analysis.phases.waited_share if analysis.phases is not None and not gpu else 0.0
    sites = pad_sites(facts.tree, length) if facts.tree is not None else []
    site = sites[0] if sites else None
    said = PaddedTokens(
        len(reading.batches), length, longest, real, r1, first.field, first.pad_value,
        reading.on_device, low_share, waited, high_share, gpu, low, bound,
        None if site is None else site.line, _site_text(site, facts.tree),
        site is not None and site.kind == "collate", uses_compile(facts),
        _unclocked(analysis),
    )  # fmt: skip
    severity = severity_of(removed_low, low=0.0) if removed_low is not None else None
    return _found(said, severity or "low", removed_high, site)


def _found(said: PaddedTokens, severity: Severity, share: float | None,
           site: PadSite | None) -> Finding:  # fmt: skip
    line = site.line if site is not None else None
    return found("data.padding", severity, said, phase_share=share, bound=said.bound,
                 low=said.low, line=line, fix=FIX, fix_params={"length": said.length})  # fmt: skip


def _unclocked(analysis: Analysis) -> int:
    busy = gpu_busy_bounds(analysis)
    return 0 if busy is None else busy.unclocked_events


def _scaling(analysis: Analysis) -> tuple[float | None, float | None]:
    """(least, most) share of the step that scales with sequence length (module docstring)."""
    if analysis.gpu is not None:
        busy = gpu_busy_bounds(analysis)
        if busy is None:
            return None, None
        # Kernels shrink; a step the host's launches pace does not follow them down. A partial
        # timeline's share is a lower bound (the least, where past the line); the most is
        # NVML's inside the steps (None: not measured).
        bound_by_gpu = busy.low >= 0.9
        return (busy.low if bound_by_gpu else None), busy.high
    phases = analysis.phases
    if phases is None or any(phases.share(p) is None for p in _SCALING):
        return None, None
    point = sum(phases.share(p) or 0.0 for p in _SCALING)
    # The share's interval where the steps read give one, else the point (one profiled step).
    low, high = share_range(analysis, _SCALING) or (point, point)
    # The least the data wait and the optimizer can take: over the run where the step clock
    # timed them (a profiled window inflates an update's many small operators: 13% of a padded
    # transformer's window step, where thread time put the patched step at 1/7 of the original).
    rest = sum((share_range(analysis, p) or (phases.share(p) or 0.0,))[0] for p in _NOT_SCALING)
    # The shares are of the steps' own time; the low end keeps their wait for a core as it was
    # (a loaded machine's per-operator waits do not shrink with the work: both padded programs
    # measured 1.9x-2.1x at load ~20, 93% of their steps waiting, against 7.0x-9.8x thread time).
    return low * (1.0 - phases.waited_share), max(high, 1.0 - rest)


# ---- where the cell pads (the rule's site and the codemod's nodes: one finder for both)


def pad_sites(tree: CellTree, length: int) -> list[PadSite]:
    """The places the cell pads to ``length``, those that reach the loop's loader first."""
    module = tree.tree
    given = _given_collates(module)
    constants = int_constants(module)
    functions = {
        node.name: node
        for node in ast.walk(module)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    sites: list[PadSite] = []
    for name in given:
        fn = functions.get(name)
        if fn is None or not fn.args.args:
            continue
        site = _collate_site(fn, length, constants, tree.line_of)
        if site is not None:
            sites.append(site)
    for call in (n for n in ast.walk(module) if isinstance(n, ast.Call)):
        padding = keyword_value(call, "padding")
        if not (isinstance(padding, ast.Constant) and padding.value == _MAX_LENGTH):
            continue
        callee = dotted(call.func) or ""
        within = next((fn for n, fn in functions.items() if n in given and _holds(fn, call)), None)
        if callee.rsplit(".", 1)[-1] == "DataCollatorWithPadding":
            reaches = _collator_given(module, call)
            sites.append(PadSite("collator", call, tree.line_of(call), reaches))
        else:
            sites.append(PadSite("tokenizer", call, tree.line_of(call), within is not None))
    sites.sort(key=lambda s: (not s.reaches, s.line))
    return [s for s in sites if tree.in_cell(s.node)] + [
        s for s in sites if not tree.in_cell(s.node)
    ]


def _given_collates(module: ast.Module) -> list[str]:
    """Names passed as ``collate_fn=``/``data_collator=`` anywhere in the cell, in order."""
    names: list[str] = []
    for call in (n for n in ast.walk(module) if isinstance(n, ast.Call)):
        for kw in call.keywords:
            value = kw.value
            if (
                kw.arg in _COLLATE_KEYWORDS
                and isinstance(value, ast.Name)
                and value.id not in names
            ):
                names.append(value.id)
    return names


def _collator_given(module: ast.Module, call: ast.Call) -> bool:
    """A ``DataCollatorWithPadding(...)`` written as the value of ``collate_fn=``/
    ``data_collator=``, or bound to a name passed there."""
    given = set(_given_collates(module))
    for node in ast.walk(module):
        if isinstance(node, ast.keyword) and node.arg in _COLLATE_KEYWORDS and node.value is call:
            return True
        if isinstance(node, ast.Assign) and node.value is call:
            return any(isinstance(t, ast.Name) and t.id in given for t in node.targets)
    return False


def _collate_site(fn: ast.FunctionDef | ast.AsyncFunctionDef, length: int,
                  constants: dict[str, int], line_of: Callable[[ast.AST], int],
                  ) -> PadSite | None:  # fmt: skip
    """A collate that pads to ``length`` by a constant (a module-level name, a parameter whose
    default it is, or the number itself): its first use in the body, and the batch's rows'
    lengths, read from a ``len(<item>...)`` over its batch argument."""
    batch = fn.args.args[0].arg
    params = _length_params(fn, length, constants)
    local = _local_names(fn)
    constant: ast.AST | None = None
    for node in (n for stmt in fn.body for n in ast.walk(stmt)):
        if _length_name(node, params, constants, length, local):
            constant = node
            break
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value == length:
            constant = constant or node
    longest = _longest_expr(fn, batch)
    if constant is None or longest is None:
        return None  # no fixed length here, or no row length to pad to instead
    return PadSite("collate", fn, line_of(fn), True, constant, longest)


def _length_name(node: ast.AST, params: set[str], constants: dict[str, int], length: int,
                 local: set[str]) -> bool:  # fmt: skip
    """A read of the length's parameter, or of a module constant equal to it (not shadowed)."""
    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
        return False
    return node.id in params or (constants.get(node.id) == length and node.id not in local)


def _length_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, length: int,
                   constants: dict[str, int]) -> set[str]:  # fmt: skip
    """Parameters whose default is ``length`` (``def collate(batch, max_len=MAX_LEN)``): the
    loader calls the collate with the batch alone, so the default is the length it pads to."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    pairs = [*zip(args[len(args) - len(fn.args.defaults) :], fn.args.defaults, strict=True)]
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d]
    found: set[str] = set()
    for arg, default in pairs:
        value = default.value if isinstance(default, ast.Constant) else None
        if isinstance(default, ast.Name):
            value = constants.get(default.id)
        if type(value) is int and value == length:
            found.add(arg.arg)
    return found


def _local_names(fn: ast.AST) -> set[str]:
    return {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    } | {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}


def _longest_expr(fn: ast.AST, batch: str) -> str | None:
    """``(len(<e>) for <target> in <batch>)`` from the first ``len(<e>)`` whose ``<e>`` reads
    the target of a loop or comprehension over the batch (or ``enumerate(batch)``)."""
    loops: list[tuple[ast.expr, ast.expr, list[ast.AST]]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.For):
            loops.append((node.target, node.iter, list(node.body)))
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            for gen in node.generators:
                loops.append((gen.target, gen.iter, [node.elt]))
    for target, iterable, body in loops:
        if not _over(iterable, batch):
            continue
        bound = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        for part in body:
            for call in (n for n in ast.walk(part) if isinstance(n, ast.Call)):
                if not (isinstance(call.func, ast.Name) and call.func.id == "len"):
                    continue
                if len(call.args) != 1:
                    continue
                used = {n.id for n in ast.walk(call.args[0]) if isinstance(n, ast.Name)}
                if used and used <= bound:
                    loop = ast.comprehension(target, iterable, [], 0)
                    return ast.unparse(ast.GeneratorExp(call, [loop]))
    return None


def _over(iterable: ast.expr, batch: str) -> bool:
    if isinstance(iterable, ast.Name):
        return iterable.id == batch
    return (
        isinstance(iterable, ast.Call)
        and dotted(iterable.func) == "enumerate"
        and len(iterable.args) >= 1
        and isinstance(iterable.args[0], ast.Name)
        and iterable.args[0].id == batch
    )


def _holds(fn: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(fn))


def _site_text(site: PadSite | None, tree: CellTree | None) -> str | None:
    """The collate's name, or the padding call's line as written."""
    if site is None or tree is None:
        return None
    if isinstance(site.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return site.node.name
    return tree.text_of(site.node)


# ---- the fix


def pad_to_longest(module: cst.Module, *, length: int) -> CodemodResult:
    """Pad each batch to its longest row where the cell pads it to ``length`` (module docstring)."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import Edited, facts_of, paired, replace_nodes

    tree = facts_of(module).tree
    sites = pad_sites(tree, length) if tree is not None else []
    site = next((s for s in sites if s.reaches and tree is not None and tree.in_cell(s.node)), None)
    if site is None:
        return _where_to_act(sites, tree, length)
    node = next(iter(paired(module, [site.node])), None)
    if site.kind in ("tokenizer", "collator"):
        from gpu_notebook.fixes.cst_tools import set_keyword

        if not isinstance(node, cst.Call):
            return _where_to_act(sites, tree, length)
        edited = set_keyword(node, "padding", cst.SimpleString('"longest"'))
        what = "the tokenizer" if site.kind == "tokenizer" else "DataCollatorWithPadding"
        return Edited(
            replace_nodes(module, {node: lambda _n: edited}),
            f'{what} pads each batch to its longest row (padding="longest")',
        )
    if not isinstance(node, cst.FunctionDef) or site.longest is None:
        return _where_to_act([], tree, length)
    return _collate_edited(module, node, site, length)


def _collate_edited(module: cst.Module, fn: cst.FunctionDef, site: PadSite,
                    length: int) -> CodemodResult:  # fmt: skip
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import (
        Edited,
        expression,
        fresh_name,
        opened_with,
        replace_nodes,
    )

    used = set(re.findall(r"\w+", module.code))  # every word of the cell: a free name
    name = fresh_name(used, ("longest", "batch_longest"))
    constant = site.constant
    cap = constant.id if isinstance(constant, ast.Name) else str(length)

    class _Swap(cst.CSTTransformer):
        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            return (
                cst.Name(name)
                if isinstance(constant, ast.Name) and updated.value == cap
                else updated
            )

        def leave_Integer(self, original: cst.Integer, updated: cst.Integer) -> cst.BaseExpression:
            if isinstance(constant, ast.Constant) and updated.evaluated_value == length:
                return cst.Name(name)
            return updated

    body = fn.body.visit(_Swap())
    assert isinstance(body, cst.IndentedBlock)
    lengths = expression(site.longest or "()").with_changes(lpar=[], rpar=[])
    longest = cst.Call(cst.Name("max"), [cst.Arg(lengths)])
    capped = cst.Call(cst.Name("min"), [cst.Arg(expression(cap)), cst.Arg(longest)])
    first = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], capped)])
    new_fn = fn.with_changes(body=opened_with(body, first))
    return Edited(
        replace_nodes(module, {fn: lambda _n: new_fn}),
        f"`{fn.name.value}`, at most {cap}",
    )


def _where_to_act(sites: list[PadSite], tree: CellTree | None, length: int) -> CodemodResult:
    """A refusal that names the place: a padding the cell makes that no loader is shown to get,
    else where padding to the batch's longest is set."""
    from gpu_notebook.fixes.cst_tools import Declined

    if sites and tree is not None:
        site = sites[0]
        text = _site_text(site, tree)
        if site.kind == "tokenizer":
            return Declined(
                f"line {site.line} (`{text}`) pads to max_length outside the collate the loader "
                "is given (every row padded before batching): tokenize without padding there "
                "and pad per batch (DataCollatorWithPadding(tokenizer) as the loader's "
                "collate_fn or the Trainer's data_collator)"
            )
        if not site.reaches:
            return Declined(
                f"line {site.line} (`{text}`) pads to {length}, but no loader or Trainer of the "
                "cell is shown to get it: pad to the batch's longest there"
            )
    return Declined(
        f"the cell makes no padding to {length} that the fix can show reaches the loop's loader "
        "(a collate or tokenizer of a library or an earlier cell): pad to the batch's longest "
        'where the batches are made (padding=True / "longest", DataCollatorWithPadding, or the '
        "collate's fixed length replaced by the batch's longest row)"
    )


FIX = Fix(
    "pad_to_longest",
    "Pad each batch to its longest row",
    (
        "Every batch is padded to a fixed length far above its longest row: the model computes "
        "on padding (attention on its square).",
        "Padding to the batch's longest keeps every row and its mask; the extra columns go.",
    ),
    "https://huggingface.co/docs/transformers/pad_truncation",
    pad_to_longest,
)
TIE = 15  # where its findings tie: after the input pipeline's (rules._families)
RULES = (padded_tokens,)
