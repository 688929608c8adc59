"""The data wait names the line of the dataset's own code that makes its items, a generator
``__iter__`` as a ``__getitem__`` (unseen round 11, iterable_text_stream: an IterableDataset
tokenizing each line in ``__iter__``, and the data-wait finding named no line of it)."""

from __future__ import annotations

from gpu_notebook.records import Report
from gpu_notebook.rules import cell_facts
from gpu_notebook.rules.input_pipeline import dataset_time, loader_in_use

# Each item: a Python loop of string work in the generator, no workers (a batch of 8 takes
# milliseconds of the main process, more than a worker's handoff).
STREAM = """\
import torch
from torch.utils.data import DataLoader, IterableDataset
torch.manual_seed(0)
torch.set_num_threads(1)


class Tokens(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            words = [str(j * i % 97) for j in range(3000)]
            yield torch.tensor([len(w) for w in words[:16]], dtype=torch.float32)


model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in DataLoader(Tokens(8 * 120), batch_size=8):
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_the_data_wait_in_a_generator_dataset_is_placed_on_its_lines(ip):
    ip.user_ns.pop("rep", None)
    ip.run_cell(f"%%gpucheck -q -o rep --lines all\n{STREAM}")
    report: Report = ip.user_ns["rep"]
    facts = cell_facts(report.run.cell_source, None, line_offset=report.run.first_line - 1)
    found = dataset_time(report.analysis, facts, loader_in_use(facts))
    assert found is not None, report.analysis.stacks
    body = STREAM.splitlines()
    first = 1 + body.index("    def __iter__(self):") + 1  # the %%gpucheck line is line 1
    assert found.function == "Tokens.__iter__"
    assert first < found.line <= first + 3  # a line of the generator's body
    assert 0 < found.line_samples <= found.samples <= found.data_samples
    (waits,) = [f for f in report.findings if f.rule_id == "input.loader_workers"] or [None]
    if waits is not None:  # the workers' model may find no gain on a busy machine: no finding
        assert f"line {found.line} `" in " ".join(waits.evidence)
        assert "`Tokens.__iter__`" in waits.fix


# unseen round 12 (pickle_whole_per_item): __getitem__ unpickles the whole data file for every
# item and keeps one row of it. The data wait named the workers; the real fix loads it once.
WHOLE_FILE = """\
import pickle
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, path, paths):
        self.path, self.paths = path, paths

    def __len__(self):
        return 2000

    def __getitem__(self, i):
        with open(self.path, "rb") as f:
            data = pickle.load(f)
        return torch.from_numpy(data["x"][i]), int(data["y"][i])


class PerItem(Rows):
    def __getitem__(self, idx):
        p = self.paths[idx % len(self.paths)]
        with open(p, "rb") as f:
            row = pickle.load(f)
        return torch.load(self.paths[idx]), row


model = torch.nn.Linear(64, 5)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for x, y in DataLoader(Rows("rows.pkl", []), batch_size=32):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_getitem_that_loads_the_same_whole_file_for_every_item_is_told_to_load_it_once():
    """The file a load reads does not depend on the index (``self.path``): the same file every
    item. A file picked by the index, directly or through a name made from it, is a per-item
    read and is left alone."""
    import ast
    import dataclasses

    from gpu_notebook.cell.tree import CellTree
    from gpu_notebook.cell.whole_loads import same_file_loads
    from gpu_notebook.records import LineStat, StackProfile
    from gpu_notebook.rules import run_rules
    from gpu_notebook.words import word_findings
    from tests.scenarios import synthetic as syn

    body = WHOLE_FILE.splitlines()
    load_line = 1 + body.index("            data = pickle.load(f)") + 1  # %%gpucheck is line 1
    facts = cell_facts(WHOLE_FILE, None, line_offset=1)
    tree = facts.tree
    assert isinstance(tree, CellTree)
    methods = {
        n.name: n
        for c in ast.walk(tree.tree)
        if isinstance(c, ast.ClassDef)
        for n in c.body
        if isinstance(n, ast.FunctionDef) and n.name == "__getitem__" and c.name == "PerItem"
    }
    assert same_file_loads(tree, methods["__getitem__"]) == {}
    hot = LineStat(load_line, body[load_line - 2], 9, 0.6, {"data": 9})
    loop = LineStat(load_line + 11, "for x, y in DataLoader(...):", 10, 0.7, {"data": 10})
    stacks = StackProfile(0.005, 12, 0.06, lines=(hot, loop))
    analysis = dataclasses.replace(syn.make_analysis({"data": 0.70}), stacks=stacks)
    found = dataset_time(analysis, facts, loader_in_use(facts))
    assert found is not None and found.same_file == "self.path" and found.line == load_line
    findings = word_findings(
        run_rules(syn.make_run(WHOLE_FILE, cpu_count=8), analysis, syn.VERDICT)
    )
    (waits,) = [f for f in findings if f.rule_id == "input.loader_workers"]
    assert "load `self.path` once (in __init__)" in waits.fix
    assert f"line {load_line} loads `self.path` whole on every item" in " ".join(waits.evidence)
