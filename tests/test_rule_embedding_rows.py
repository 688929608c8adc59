"""rules/embedding_rows: a large dense embedding table a stateful optimizer updates whole.

Unseen round 20's bigtable_dense_adam (a 200,000-row ``nn.Embedding`` under Adam, batch 256):
99% of the step in Adam's passes over the table and its moments; ``sparse=True`` with
``SparseAdam`` for the table 29x-35x by hand, and the product named nothing. Real %%gpucheck
runs of a smaller two-tower cell (the finding, its range and its words; under plain SGD, where
``sparse=True`` alone is the same update: by hand on this cell 16x, Adam's SparseAdam split 18x)
and of its negatives: a small table, ``sparse=True`` + SparseAdam, a frozen table; the live
reading on real modules (a tied LM head, weight decay, momentum by group, Adagrad, LBFGS).
"""

from __future__ import annotations

import pytest

from gpu_notebook.cell.live import live_facts
from gpu_notebook.rules.embedding_rows import LOW_REMOVED, MIN_ROWS
from tests.cells import measured

TWO_TOWER = """\
class TwoTower(nn.Module):
    def __init__(self, users, items, d=16):
        super().__init__()
        self.users = nn.Embedding(users, d)
        self.items = nn.Embedding(items, d, sparse={sparse})
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
    def forward(self, u, i):
        return (self.mlp(self.users(u)) * self.items(i)).sum(1)
tt = TwoTower(1_000, {rows})
{opt}
u_ids = torch.randint(0, 1_000, (32 * 12,)); i_ids = torch.randint(0, {rows}, (32 * 12,))
lossf = nn.BCEWithLogitsLoss()
for s in range(0, len(u_ids), 32):
    u, pos = u_ids[s : s + 32], i_ids[s : s + 32]
    logits = torch.cat([tt(u, pos), tt(u, torch.randint(0, {rows}, (32,)))])
    loss = lossf(logits, torch.cat([torch.ones(32), torch.zeros(32)]))
    for o in opts:
        o.zero_grad()
    loss.backward()
    for o in opts:
        o.step()
"""
ADAM = "opt = torch.optim.Adam(tt.parameters(), lr=1e-3); opts = [opt]"
SGD = "opt = torch.optim.SGD(tt.parameters(), lr=0.1); opts = [opt]"
SPARSE = (
    "dense = torch.optim.Adam([*tt.users.parameters(), *tt.mlp.parameters()], lr=1e-3)\n"
    "sparse = torch.optim.SparseAdam(list(tt.items.parameters()), lr=1e-3); opts = [dense, sparse]"
)
FROZEN = (
    "tt.items.weight.requires_grad_(False)\n"
    "opt = torch.optim.Adam([p for p in tt.parameters() if p.requires_grad]); opts = [opt]"
)


def cell(rows: int, opt: str, sparse: bool = False) -> str:
    return TWO_TOWER.format(rows=rows, opt=opt, sparse=sparse)


def rule_hits(rep):
    return [f for f in rep.findings if f.rule_id == "embedding_rows.dense_table"]


@pytest.fixture(scope="module")
def big_adam(ip):
    return measured(ip, cell(300_000, ADAM))


def test_a_large_dense_table_under_adam_is_named_with_the_sparse_recipe(big_adam):
    (f,) = rule_hits(big_adam)
    # The mechanism: the table is nearly all Adam's elements, Adam's update much of the step.
    assert f.phase_share is not None and f.phase_share >= 0.05
    assert f.gain_bound is not None and f.gain_low is not None
    assert 1.0 < f.gain_low <= f.gain_bound
    assert f.fix_id is None  # a refusal with advice: the optimizer split changes the recipe
    text = " ".join((f.title, *f.evidence, f.fix))
    assert "`items` (Embedding, 300,000 rows x 16, sparse=False)" in text
    assert "sparse=True" in f.fix and "SparseAdam" in f.fix and "no weight decay" in f.fix
    assert "touched rows' moments" in f.fix  # the maths change, said
    assert "users" not in text  # 1,000 rows: under MIN_ROWS
    # The loop's `for o in opts` binds the same Adam as `o`: counted once, named as made.
    assert text.count("`items`") == 1 and "`opt` (Adam)" in text
    assert f.phase_share <= 1.0


@pytest.mark.parametrize(
    ("rows", "opt", "sparse"),
    [
        (20_000, ADAM, False),  # a small table: a batch's ids cover much of it
        (300_000, SPARSE, True),  # already sparse, under SparseAdam
        (300_000, FROZEN, False),  # frozen: in no optimizer
    ],
    ids=["small", "sparse", "frozen"],
)
def test_no_finding_where_the_update_is_not_the_whole_tables(ip, rows, opt, sparse):
    rep = measured(ip, cell(rows, opt, sparse))
    assert not rule_hits(rep), [f.title for f in rep.findings]


def test_plain_sgd_is_told_sparse_true_alone_the_same_update(ip):
    rep = measured(ip, cell(300_000, SGD))
    (f,) = rule_hits(rep)
    # SGD takes sparse gradients and leaves a zero row as it is: no SparseAdam, no other maths.
    assert "`sparse=True`" in f.fix and "the same update" in f.fix and "SparseAdam" not in f.fix
    assert "and its state" not in " ".join(f.evidence)
    # The dense gradient is made in the backward: the high end counts it (by hand 16x here).
    assert any(e.startswith("backward: ") for e in f.evidence)
    assert f.gain_bound is not None and f.gain_bound > 1.0 / (1.0 - f.phase_share)


def _tables(ns, names=("m", "opt")):
    (o,) = live_facts(ns, names).optimizers
    return o


def test_the_live_reading_follows_groups_ties_and_momentum():
    torch = pytest.importorskip("torch")
    nn = torch.nn
    m = nn.ModuleDict({"emb": nn.Embedding(MIN_ROWS, 4), "bag": nn.EmbeddingBag(MIN_ROWS, 4)})
    # SGD: the table in a group with momentum has row state; the bag's group has none.
    opt = torch.optim.SGD(
        [{"params": [m["emb"].weight], "momentum": 0.9}, {"params": [m["bag"].weight]}], lr=0.1
    )
    o = _tables({"torch": torch, "m": m, "opt": opt})
    assert o.numel == 2 * MIN_ROWS * 4
    by = {t.module: t for t in o.tables}
    assert by["emb"].row_state and not by["bag"].row_state and by["bag"].kind == "EmbeddingBag"
    # AdamW with weight decay: said (SparseAdam takes none).
    opt = torch.optim.AdamW(m.parameters(), weight_decay=0.01)
    assert all(t.weight_decay and t.row_state for t in _tables({"m": m, "opt": opt}).tables)
    # Adagrad without weight decay adds 0 to a zero row's accumulator: no row state.
    assert not any(
        t.row_state for t in _tables({"m": m, "opt": torch.optim.Adagrad(m.parameters())}).tables
    )
    # An optimizer of unknown maths is not judged: its elements counted, no tables.
    lbfgs = _tables({"m": m, "opt": torch.optim.LBFGS(m.parameters())})
    assert lbfgs.numel == 2 * MIN_ROWS * 4 and lbfgs.tables == ()

    # A tied LM head: the same weight is the head's, its gradient dense over every row.
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(MIN_ROWS, 4)
            self.head = nn.Linear(4, MIN_ROWS, bias=False)
            self.head.weight = self.embed.weight

    lm = LM()
    (table,) = _tables({"m": lm, "opt": torch.optim.AdamW(lm.parameters())}).tables
    assert table.tied and table.module == "embed"


def test_the_range_takes_the_tables_part_of_the_update(big_adam):
    (f,) = rule_hits(big_adam)
    # The high end removes the tables' whole part and the backward (the dense gradient's); the
    # low end LOW_REMOVED of the tables' update at the low end.
    assert f.phase_share is not None and f.gain_bound is not None and f.gain_low is not None
    assert f.gain_bound > 1.0 / (1.0 - f.phase_share)
    assert f.gain_low <= 1.0 / (1.0 - LOW_REMOVED * f.phase_share) * 1.001
