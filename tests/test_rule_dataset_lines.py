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
