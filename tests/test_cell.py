"""The one reading of the cell (gpu_notebook/cell): the rules' facts and the fixes' codemods use
the same words, so what a rule counts is what its fix acts on."""

from __future__ import annotations

import ast

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.fixes import Patch, apply_fix

TRACKER_CELL = """\
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    tracker.log_dict({"lr": 0.1})
"""


def test_a_per_step_log_dict_is_logging_for_the_rule_and_for_its_fix():
    facts = scan_source(TRACKER_CELL)
    assert [(line.kind, line.gated) for line in facts.logging] == [("tracker", False)]
    patched = apply_fix("log_every_n", TRACKER_CELL, every=10)
    assert isinstance(patched, Patch), patched
    assert "if step % 10 == 0:\n        tracker.log_dict" in patched.source_after


MUON_CELL = """\
import torch
opt = torch.optim.Muon(model.parameters(), lr=0.02)
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
"""


def test_an_optimizer_class_known_to_the_fixes_is_known_to_the_rules():
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import optimizer_names

    assert [o.cls for o in scan_source(MUON_CELL).optimizers] == ["Muon"]
    assert optimizer_names(cst.parse_module(MUON_CELL)) == {"opt"}


# A per-step .item() and a per-step print: two findings, two fixes (syncs and logging).
TWO_FIX_CELL = """\
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    seen = loss.item()
    print("step done", i)
"""


def test_a_report_with_two_fixes_parses_the_cell_once_per_parser():
    from gpu_notebook.cell import parse
    from gpu_notebook.rules import run_rules
    from gpu_notebook.words import word_findings as words
    from gpu_notebook.words.proposals import attach_fixes
    from tests.scenarios import synthetic as syn

    parse.forget()
    run = syn.make_run(TWO_FIX_CELL)
    analysis = syn.make_analysis({"sync": 0.1, "other": 0.1, "unattributed": 0.2})
    findings = words(run_rules(run, analysis, syn.VERDICT))
    # The fixes read the cell as the notebook holds it (the %%gpucheck line on top).
    fixed = attach_fixes(findings, "%%gpucheck\n" + TWO_FIX_CELL)
    patches = [f.proposal for f in fixed if f.proposal is not None and f.proposal.diff]
    assert {p.fix_id for p in patches} >= {"throttle_host_syncs", "log_every_n"}
    # One ast parse of the cell (facts, rules, analysis) and one libcst parse (every codemod);
    # each patched cell is checked once (our output, not a reading of the cell).
    assert parse.PARSES["ast"] == 1 and parse.PARSES["libcst"] == 1, parse.PARSES
    assert parse.PARSES["check"] == len(patches)


def test_a_facts_node_names_the_same_code_in_libcst_even_after_wide_characters():
    import ast

    from gpu_notebook.cell.parse import cst_nodes, parse_ast, parse_cst

    code = 'label = "pérdida ü"; x = torch.zeros(2).to(dev)\nfor i in range(3):\n    f(g(i), "é")\n'
    calls = [n for n in ast.walk(parse_ast(code)) if isinstance(n, ast.Call)]
    module = parse_cst(code)
    found = cst_nodes(module, calls)
    assert [module.code_for_node(n) for n in found] == [
        ast.get_source_segment(code, c) for c in calls
    ]
    assert len(found) == 5 and all(n is not None for n in found)


def test_a_cell_that_does_not_parse_is_parsed_once_and_says_why_each_time():
    from gpu_notebook.cell import parse

    parse.forget()
    bad = "for x in y\n    pass\n"
    first, again = scan_source(bad), scan_source(bad)
    assert not first.parsed and first.parse_error == again.parse_error
    assert "line 1" in (first.parse_error or "")
    assert parse.PARSES["ast"] == 1


def test_fixes_that_edit_what_the_rules_found_parse_nothing_more():
    from gpu_notebook.cell import parse
    from gpu_notebook.rules.host_tensors import FIX

    cell = TWO_FIX_CELL.replace(
        "    loss = ", "    x = x.to(device)\n    n = torch.zeros(2).cuda()\n    loss = "
    )
    parse.forget()
    facts = scan_source(cell)
    assert [c.line for c in facts.blocking_copies] == [2, 3]
    for fix in ("non_blocking_copies", FIX):
        assert isinstance(apply_fix(fix, cell), Patch)
    assert parse.PARSES["ast"] == 1 and parse.PARSES["libcst"] == 1, parse.PARSES


# Loops, calls, keywords, literals and logs of every kind the helpers read.
BOTH_TREES_CELL = """\
import torch
loader = DataLoader(ds, batch_size=32, num_workers=0, pin_memory=pin, **extra)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=-1, nesterov=True)
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        out = self.net(x.to(device, non_blocking=True))
        loss = loss_fn(out, y) + 0.5 * reg[step]
        scaler.scale(loss).backward()
        wandb.log({"loss": loss}, step=step)
        print(f"{epoch}: {loss.item():.3f}", file=sys.stderr)
        pbar.set_postfix(loss=float(loss))
        logger.info("done %d", step)
        history.append(loss)
    for batch in val_loader:
        evaluate(model, batch, strict=False, limit=None)
"""


def test_the_name_helpers_read_an_ast_node_and_its_libcst_node_alike():
    """One set of helpers for the facts (ast) and the codemods (libcst): for every loop and call
    of a cell, each helper answers the same on the facts' node and on the node a fix edits (the
    fixes once kept libcst copies of them, and the copies drifted)."""
    from gpu_notebook.cell import names
    from gpu_notebook.cell.parse import cst_nodes, parse_cst

    tree = scan_source(BOTH_TREES_CELL).tree
    assert tree is not None
    found = [*tree.loops, *tree.calls()]
    mapped = cst_nodes(parse_cst(BOTH_TREES_CELL), found)
    assert None not in mapped and len(found) == 21

    def reading(node):
        if type(node).__name__ == "For":
            return (names.loop_target_names(node), names.loss_names(node), names.names_in(node))
        words = ("batch_size", "num_workers", "pin_memory", "lr", "momentum", "nesterov", "limit")
        given = {w: names.keyword_of(node, w) for w in words}
        return (
            names.dotted(node.func),
            names.method_of(node),
            names.logs_with(node),
            names.has_star_kwargs(node),
            names.names_in(node),
            {w: None if k is None else names.literal_of(k.value) for w, k in given.items()},
        )

    for ast_node, cst_node in zip(found, mapped, strict=True):
        assert reading(ast_node) == reading(cst_node), ast.unparse(ast_node)


def test_a_literal_the_facts_point_at_is_the_libcst_literal_a_fix_edits():
    """ast reads every literal as one ``Constant``; libcst has a kind for each (``Integer``,
    ``Float``, ``SimpleString``, ``True`` a ``Name``): the facts' literal still names the one
    a fix edits, so the workers fix changes ``n = 0`` where the loader's count comes from."""
    from gpu_notebook.cell.origins import int_origin
    from gpu_notebook.cell.parse import cst_nodes, parse_cst

    code = "n = 0\ncfg = {'w': 3}\nx = (1.5, 'é', True, None, 2j)\nDataLoader(ds, num_workers=n)\n"
    facts = scan_source(code, line_offset=0)
    assert facts.tree is not None
    literals = [n for n in ast.walk(facts.tree.tree) if isinstance(n, ast.Constant)]
    module = parse_cst(code)
    found = cst_nodes(module, literals)
    assert [module.code_for_node(n) for n in found if n is not None] == [
        ast.get_source_segment(code, c) for c in literals
    ]
    call = facts.loaders[0].node
    assert isinstance(call, ast.Call)
    origin = int_origin(facts.tree, call.keywords[0].value)
    assert origin is not None and module.code_for_node(cst_nodes(module, [origin])[0]) == "0"
    entry = int_origin(facts.tree, ast.parse("cfg['w']", mode="eval").body)
    assert entry is not None and entry.value == 3


def test_the_model_an_optimizer_trains_is_a_fact_of_its_call():
    facts = scan_source(
        "enc = Enc()\nopt = torch.optim.AdamW([{'params': enc.named_parameters()}], lr=1e-3)\n"
    )
    assert facts.optimizers[0].params_of == "enc" and facts.trained_model() == "enc"
    unnamed = scan_source("model = nn.Linear(2, 2)\nopt = SGD(params, lr=0.1)\n")
    assert unnamed.trained_model() == "model"


def test_the_names_a_cell_mentions_are_those_a_fix_must_not_reuse():
    """A fix's new name (``step``, ``scaler``) must not be one the cell mentions in any form:
    a variable, a parameter, a def, an import, a global; an attribute or a keyword is none."""
    from gpu_notebook.cell.scan import names_mentioned

    code = (
        "import torch.nn as tnn, os.path\nfrom a.b import c\n"
        "def train(step, *rest, scaler=None):\n    global best\n    opt.zero_grad(set_to_none=True)\n"
        "for i, x in enumerate(loader):\n    total = i\n"
    )
    facts = scan_source(code)
    named = {"torch", "tnn", "os", "a", "c", "train", "step", "rest", "scaler", "best", "opt"}
    assert names_mentioned(facts) == named | {"i", "x", "enumerate", "loader", "total"}
    assert names_mentioned(facts, skip=facts.loops[0]) == named
