"""The profiler window of a loop whose cycle of optimizer steps is learnt after it started: a
critic's D steps each end a step until its G step shows the cycle, and the window that recorded
some of them records again on whole steps."""

from __future__ import annotations

import pytest

from tests.test_magic import run

CRITIC = """
d, g = torch.nn.Linear(16, 1), torch.nn.Linear(16, 16)
opt_d = torch.optim.RMSprop(d.parameters(), lr=1e-4)
opt_g = torch.optim.RMSprop(g.parameters(), lr=1e-4)
{setup}
for it in range(12):
    for _ in range(5):
        x = {batch}
        opt_d.zero_grad()
        (d(g(torch.randn(32, 16)).detach()).mean() - d(x).mean()).backward()
        opt_d.step()
    opt_g.zero_grad()
    (-d(g(torch.randn(32, 16))).mean()).backward()
    opt_g.step()
"""
NO_LOADER = CRITIC.format(setup="", batch="torch.randn(32, 16)")
# WGAN's critic reads a batch of its own each D step.
LOADER = CRITIC.format(
    setup=(
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "batches = iter(DataLoader(TensorDataset(torch.randn(60 * 32, 16)), batch_size=32))"
    ),
    batch="next(batches)[0]",
)


@pytest.mark.parametrize("cell", [NO_LOADER, LOADER], ids=["no-loader", "loader"])
def test_a_critic_loop_s_window_records_whole_steps(ip, cell):
    """main: the window (warm-up 2, 3 steps) recorded D steps 3-5 of the first iteration and was
    kept 'within-step' (no loader: a trace of no whole step); with a loader, 5 steps a G step."""
    rep = run(ip, cell)
    steps = rep.run.steps
    assert steps.anchor == "optimizer" and steps.step_count == 12
    # Timed steps hold a whole iteration, never more. Left out: step 0 (the cell's first
    # backward is not in the session's counts, on main too), and the step timed again right
    # after a regroup of steps the clock had gone lean on (the machine's load decides whether
    # it did: its backward calls ran untimed).
    timed = [s.backward_calls for s in steps.steps[1:] if s.timed]
    assert timed and max(timed) == 6 and timed.count(6) >= len(timed) - 2, timed
    window = rep.run.window
    assert window.status == "recorded", window
    assert window.recorded_steps == 3 and window.first_step is not None
    assert window.first_step >= 2  # the warm-up counted in whole steps
