"""A class or function of the user's named like a process launcher starts no process (unseen
round 14: ``class Pool(nn.Module)``, a mean-pooling classifier built by ``Pool().to(device)``,
read as ``multiprocessing.Pool``: "the script starts processes (Pool) ... no optimizer step
was counted in its child processes" on a script that started none)."""

from __future__ import annotations

from gpu_notebook.analysis.elsewhere import children_note

TRAIN = "opt.zero_grad(); loss.backward(); opt.step()\n"


def test_a_model_class_named_like_a_launcher_starts_no_process():
    pool = "class Pool(nn.Module):\n    pass\nmodel = Pool().to(device)\n" + TRAIN
    assert children_note(pool, here=100, in_children=0) is None
    # Differently shaped: a helper function named spawn, a layer class named Process.
    helper = (
        "def spawn(n):\n    return [torch.randn(4) for _ in range(n)]\n"
        "class Process(nn.Module):\n    pass\n"
        "xs = spawn(8)\nlayer = Process()\n" + TRAIN
    )
    assert children_note(helper, here=100, in_children=0) is None


def test_launchers_of_the_libraries_are_still_named():
    for source in (
        "import torch.multiprocessing as mp\nmp.Pool(2).map(f, xs)\n",
        "from multiprocessing import Pool\nwith Pool(2) as p: p.map(f, xs)\n",
        # A class of the user's beside a real launcher: the launcher is named.
        "class Pool(nn.Module):\n    pass\nmp.spawn(train, nprocs=2)\n",
    ):
        note = children_note(source + TRAIN, here=0, in_children=0)
        assert note is not None and note.launchers, source
