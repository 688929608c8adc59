"""The framework's share reads the same on a quiet and a busy machine: each stack sample carries
the loop thread's CPU time and wait for a core, and the share is read on the thread's own clock
(issue 26: a Lightning ``log_dict`` every step read 43% at load 7.6 and 21-23% at load 15-26,
where it took 69% of the loop thread's CPU)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import threading
import time
from collections.abc import Callable

import pytest

from gpu_notebook.analysis import framework_stacks as fs
from gpu_notebook.analysis.loader_wait import blocked_kept
from gpu_notebook.capture.stacks import StackSampler, infer_phase
from gpu_notebook.records import (
    CodeRef,
    GpuInfo,
    RawStacks,
    StackCount,
    StepClockRecord,
    StepTiming,
)
from tests.scenarios import synthetic as syn
from tests.test_rules import only, rules_for

pytest.importorskip("lightning")

CELL = CodeRef("<cell>", "<module>", 1)
LIT_CELL = """
class Lit(L.LightningModule):
    def training_step(self, batch, i):
        loss = self.net(batch).mean()
        self.log("loss", loss)
        return loss
trainer = L.Trainer(max_steps=10, log_every_n_steps=1)
trainer.fit(Lit())
"""


def ref(fn) -> CodeRef:
    return CodeRef(inspect.getsourcefile(fn), fn.__qualname__, fn.__code__.co_firstlineno)


def _raw(parts: list[tuple[list[CodeRef], int, int, int]], *, clock: bool = True) -> RawStacks:
    """Stacks of (frames, wall us, CPU us, wait-for-a-core us), 40 samples each."""
    functions: list[CodeRef] = []
    stacks = []
    for frames, wall, cpu, wait in parts:
        for r in frames:
            if r not in functions:
                functions.append(r)
        idx = tuple((functions.index(r), r.first_line) for r in frames)
        phase = infer_phase(frames)  # as the sampler reads it at stop (a DataLoader's "data")
        stacks.append(StackCount(idx, phase, 40, wall, True, cpu_us=cpu, wait_us=wait))
    return RawStacks(
        1,
        0.01,
        40 * len(stacks),
        sum(s.time_us for s in stacks),
        1.0,
        tuple(functions),
        tuple(stacks),
        cpu_us=sum(s.cpu_us for s in stacks) if clock else None,
        wait_us=sum(s.wait_us for s in stacks) if clock else None,
    )


def _lightning(log: tuple[int, int, int], model: tuple[int, int, int], **kw) -> RawStacks:
    import lightning.pytorch as pl
    from torch.nn import Module

    fit, self_log, call = ref(pl.Trainer.fit), ref(pl.LightningModule.log), ref(Module._call_impl)
    return _raw([([CELL, fit, self_log], *log), ([CELL, fit, call], *model)], **kw)


def _share(
    raw: RawStacks, gpus: tuple[GpuInfo, ...] = (), steps: StepClockRecord | None = None
) -> tuple[float, str]:
    run = dataclasses.replace(syn.make_run(LIT_CELL, gpus=gpus, steps=steps), stacks=raw)
    f = only(rules_for(run, syn.make_analysis({})), "logging.framework_overhead")
    return f.phase_share or 0.0, " ".join(f.evidence)


def test_a_busy_machines_waits_for_a_core_do_not_move_the_logging_share():
    # Quiet: 3 ms of log calls and 7 ms of model per 10 ms, all on a core. Busy, the same work:
    # the loop thread waited 3x its work for a core, most of it in the model's frames (each GIL
    # taken back after a small op is a wake-up that queues for a core): the wall clock read
    # the log calls at 30% quiet, 6000/(6000+34000) = 15% busy. The thread's own clock reads
    # 30% both.
    quiet = _lightning((3000, 3000, 0), (7000, 7000, 0))
    busy = _lightning((6000, 3000, 3000), (34000, 7000, 27000))
    (q, q_words), (b, b_words) = _share(quiet), _share(busy)
    assert q == pytest.approx(b)
    assert "30%" in q_words and "30%" in b_words
    assert "the loop thread's CPU time (and its wait for data)" in b_words
    wall = _share(dataclasses.replace(busy, cpu_us=None, wait_us=None))
    assert "15%" in wall[1] and "CPU time" not in wall[1]  # what main read of the same samples


def test_the_loop_threads_cpu_in_the_log_calls_is_their_time_wherever_the_wall_time_fell():
    # A sampler delayed by the GIL takes its sample in the frame that waited for it (the model's,
    # after an op), with the wait in its wall time; the samples in the log calls stood for less
    # wall time than their work. Their CPU time is their work: 3 ms of the 10 ms step.
    quiet = _lightning((3000, 3000, 0), (7000, 7000, 0))
    skewed = _lightning((2000, 3000, 0), (8000, 7000, 0))
    assert _share(quiet)[0] == pytest.approx(_share(skewed)[0])


def test_the_loop_threads_wait_for_the_gil_in_the_models_frames_does_not_move_the_share():
    # Busy, the loop thread also blocked 9 ms a step for the GIL after the model's small ops
    # while the thread that took it waited for a core: off any core, not in the data phase.
    # The wall clock read 12000/(12000+44000) = 21%; the thread's CPU clock 30%, as quiet.
    quiet = _lightning((3000, 3000, 0), (7000, 7000, 0))
    busy = _lightning((12000, 3000, 9000), (44000, 7000, 28000))
    assert _share(quiet)[0] == pytest.approx(_share(busy)[0])
    assert "21%" in _share(dataclasses.replace(busy, cpu_us=None, wait_us=None))[1]


def _blocked_in_loader() -> RawStacks:
    """3 ms of log calls and 7 ms of model on a core a step, and 10 ms blocked off any core in
    the loader's frames."""
    import lightning.pytorch as pl
    from torch.nn import Module
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    fit, log, call = ref(pl.Trainer.fit), ref(pl.LightningModule.log), ref(Module._call_impl)
    data = ref(_BaseDataLoaderIter.__next__)
    return _raw([([CELL, fit, log], 6000, 3000, 3000), ([CELL, fit, call], 14000, 7000, 7000),
                 ([CELL, fit, data], 10000, 0, 0)])  # fmt: skip


def _loader_steps(blocked_ms: list[float], contention_ms: list[float]) -> StepClockRecord:
    """Steps whose loader calls the step clock read apart: blocked (none of it a worker's queue)
    and of that, blocked while another thread of the process computed."""
    rows = tuple(
        StepTiming(i, 0.02 * i, 0.02, 0.01, 0.004, 0.004, 0.002, 1, 1, 32, wait_s=0.0,
                   data_blocked_s=b / 1e3, data_unqueued_s=b / 1e3, data_contention_s=c / 1e3)
        for i, (b, c) in enumerate(zip(blocked_ms, contention_ms, strict=True))
    )  # fmt: skip
    return StepClockRecord("optimizer", len(rows), rows)


def test_a_cpu_runs_blocked_wait_stays_in_the_step_not_in_the_logging_share():
    # The loop thread blocks 10 ms a step off any core (a dataset's read, a worker's queue):
    # that is the step's time. The log calls' 3 ms of CPU are 15% of the 20 ms step, not the
    # 30% of the CPU time alone (a bound over that would promise twice the gain). The step
    # clock read the loader's block as its own: the same 10 ms every step, no other thread
    # computing meanwhile (a sleep a sample); or not at all (an older record).
    raw = _blocked_in_loader()
    assert "15%" in _share(raw)[1] and "30%" not in _share(raw)[1]
    sleeps = _loader_steps([10.0] * 40, [0.0] * 40)
    assert blocked_kept(sleeps.steps) == pytest.approx(1.0)
    assert "15%" in _share(raw, steps=sleeps)[1]


def test_the_loop_threads_wait_for_the_gil_in_the_loader_is_not_the_steps_data_wait():
    # Framework share cause 2: the loader computes and never blocks (a TensorDataset), but
    # another thread of the process holds the GIL the loop thread needs after the collate's
    # op: our samplers, which on a busy machine wait for a core holding it (the step clock
    # read 0-20 ms blocked a step, coming and going), or a side thread that computes (read as
    # contention there). Neither is a wait for data: the log calls' 3 ms of CPU are 30% of the
    # loop thread's 10 ms of work, as quiet; main gave the blocked time to the loader (15%).
    raw = _blocked_in_loader()
    held = _loader_steps([0.0, 0.0, 0.0, 0.0, 20.0] * 8, [0.0] * 40)
    computed = _loader_steps([10.0] * 40, [10.0] * 40)
    assert blocked_kept(held.steps) == pytest.approx(0.0)
    assert blocked_kept(computed.steps) == pytest.approx(0.0)
    assert "30%" in _share(raw, steps=held)[1] and "15%" not in _share(raw, steps=held)[1]
    assert "30%" in _share(raw, steps=computed)[1]
    # A sleeping loader's own 8 ms a step stays its; only a holder's 12 ms on one step in 5 go.
    mixed = _loader_steps([8.0, 8.0, 8.0, 8.0, 20.0] * 8, [0.0] * 40)
    assert blocked_kept(mixed.steps) == pytest.approx(320 / 416)


def test_a_gpu_runs_wait_for_the_device_in_a_log_call_is_the_log_calls_time():
    # On a GPU a log call's .item() waits for the device off any core: its time, kept; only the
    # wait for a core is taken out (quiet: 3 ms of 10; busy: the same and 4 ms of core waits).
    gpu = (GpuInfo(0, "NVIDIA A100-SXM4-40GB", memory_total_bytes=40 * 2**30),)
    quiet = _lightning((3000, 500, 0), (7000, 7000, 0))
    busy = _lightning((7000, 500, 4000), (15000, 7000, 8000))
    (q, q_words), (b, b_words) = _share(quiet, gpu), _share(busy, gpu)
    assert q == pytest.approx(b) and "30%" in q_words and "30%" in b_words
    assert "less the loop thread's waits for a core" in b_words


def test_samples_without_a_thread_clock_keep_the_wall_clock():
    raw = _lightning((3000, 0, 0), (7000, 0, 0), clock=False)
    run = dataclasses.replace(syn.make_run(LIT_CELL), stacks=raw)
    assert fs.share_clock(run, [raw]) == "wall"
    assert fs.on_own_clock(raw, "wall") is raw
    assert "30%" in _share(raw)[1]


def _spin(cpu_s: float) -> None:
    t0 = time.thread_time()
    while time.thread_time() - t0 < cpu_s:
        pass


def _sleep(s: float) -> None:
    time.sleep(s)


def test_a_real_samplers_samples_carry_the_threads_cpu_time_and_none_while_it_sleeps():
    if StackSampler(threading.get_ident())._thread_clock is False:
        pytest.skip("no thread clock")
    sampler = StackSampler(threading.get_ident(), 0.005, root_codes=()).start()
    cpu0 = time.thread_time()
    for _ in range(10):
        _spin(0.01)
        _sleep(0.02)
    cpu_s = time.thread_time() - cpu0
    raw = sampler.stop()
    if raw.cpu_us is None:
        pytest.skip("no schedstat on this system")
    names = {i: r.function for i, r in enumerate(raw.functions)}
    by: dict[str, list[int]] = {}
    for s in raw.stacks:
        tally = by.setdefault(names[s.frames[-1][0]], [0, 0, 0])
        tally[0] += s.time_us
        tally[1] += s.cpu_us
        tally[2] += s.wait_us
    # What the thread spent on a core while sampled, and nothing of another thread's (this
    # thread's CPU between the sampler's start and stop, the samples' spans within it).
    assert 0 < raw.cpu_us <= cpu_s * 1e6 + 20_000
    assert raw.cpu_us >= 0.5 * 0.1e6  # the spins' 100 ms of CPU, up to a late first sample
    # Asleep, the thread computes nothing: only a sample's span reaching back into a spin
    # carries CPU (one per sleep at most), and never more than a sample's span.
    if "_sleep" in by:
        wall, cpu, _wait = by["_sleep"]
        assert cpu <= 10 * 7_500 + 0.25 * wall
    assert all(s.cpu_us <= s.time_us + 5_000 for s in raw.stacks)


def test_the_edge_sampler_reads_no_thread_clock():
    edges = StackSampler(threading.get_ident(), 0.05, segment_provider=lambda: ("none", 0))
    assert edges._thread_clock is False
    assert edges.start().stop().cpu_us is None


def test_a_followed_thread_is_weighed_on_its_own_clock():
    # The steps run on a thread the cell started: the sampler follows it, and its samples then
    # carry that thread's CPU (it spins), not the cell's thread's (it waits on a join).
    done = threading.Event()
    ready = threading.Event()

    def worker() -> None:
        ready.set()
        while not done.is_set():
            _spin(0.005)

    t = threading.Thread(target=worker)
    sampler = StackSampler(threading.get_ident(), 0.005, root_codes=()).start()
    t.start()
    ready.wait()
    sampler.follow(t.ident or 0)
    time.sleep(0.3)
    raw = sampler.stop()
    done.set()
    t.join()
    if raw.cpu_us is None:
        pytest.skip("no schedstat on this system")
    spun = sum(s.cpu_us for s in raw.stacks if raw.functions[s.frames[-1][0]].function == "_spin")
    assert spun > 0 and spun >= 0.5 * raw.cpu_us


def test_samples_taken_without_the_thread_clock_read_from_the_start_carry_none():
    # A sampler never started (samples handed in, as the cell-time tests do) read no clock:
    # its record says so, and the share keeps the wall clock, never a CPU time of 0.
    sampler = StackSampler(threading.get_ident(), 0.005)
    sampler._sample_frame(sys._getframe(), 0, 1_000_000_000)  # type: ignore[arg-type]
    sampler._started = True
    raw = sampler.stop()
    assert raw.samples == 1 and raw.cpu_us is None and raw.wait_us is None


def test_samples_in_our_own_step_clock_are_not_the_programs_loop():
    # A busy machine (load 26-29) left 34% of a Lightning run's sparse samples on the step
    # clock's reads of the thread's CPU clock around the optimizer step and its closure, and
    # read the log calls at 27% where a quieter run read 52%. Our code's samples are not the
    # loop's; the program's code our wrappers call stays the program's.
    import lightning.pytorch as pl
    from torch.nn import Module

    from gpu_notebook.capture.stepclock import StepClock

    fit, log, call = ref(pl.Trainer.fit), ref(pl.LightningModule.log), ref(Module._call_impl)
    hook = ref(StepClock._on_opt_pre)
    wrapper = CodeRef(hook.filename, "StepClock._wrap_closure.<locals>.closure", 722)
    quiet = _raw([([CELL, fit, log], 3000, 3000, 0), ([CELL, fit, wrapper, call], 7000, 7000, 0)])
    busy = _raw([([CELL, fit, log], 3000, 3000, 0), ([CELL, fit, wrapper, call], 7000, 7000, 0),
                 ([CELL, fit, hook], 5000, 5000, 0), ([CELL, fit, wrapper], 1000, 1000, 0)])  # fmt: skip
    assert "30%" in _share(quiet)[1] and "30%" in _share(busy)[1]
    kept = fs.without_ours(busy)
    assert kept.samples == 80 and kept.time_us == 10_000


def _loader_loop(
    dataset: object, side: Callable[[threading.Event], None] | None
) -> StepClockRecord:
    """60 optimizer steps of a small model under a real step clock, its batches from a
    ``num_workers=0`` DataLoader over ``dataset``, ``side`` running on a thread of its own."""
    import torch
    from torch.utils.data import DataLoader

    from gpu_notebook.capture.stepclock import StepClock

    done = threading.Event()
    thread = threading.Thread(target=side, args=(done,), daemon=True) if side else None
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    if thread is not None:
        thread.start()
    try:
        it = iter(DataLoader(dataset, batch_size=4))  # type: ignore[arg-type]
        for _ in range(60):
            model(next(it)).sum().backward()
            opt.step()
            opt.zero_grad()
    finally:
        done.set()
        clock.uninstall()
        if thread is not None:
            thread.join()
    return clock.record()


class _Releases:
    """A sample is one torch op (~0.2 ms) that releases the GIL: long enough for a waiting thread
    to take it (a cheap op is over before that thread wakes)."""

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int) -> object:
        import torch

        return torch.ones(1 << 17).cumsum(0)[:64]  # ~0.2 ms off the GIL


class _Sleeps(_Releases):
    def __getitem__(self, i: int) -> object:
        import torch

        time.sleep(0.001)
        return torch.zeros(64)


def _holds_the_gil(done: threading.Event) -> None:
    while not done.is_set():
        sum(range(1000))  # pure Python: the GIL until the switch interval asks for it


def test_a_side_threads_gil_is_taken_out_of_the_loaders_data_wait():
    # The loader's only work is an op that releases the GIL; a side thread computing in Python
    # takes it there, and the loop thread blocks until the switch interval hands it back. The
    # step clock reads the loader's calls apart on steps 1-39 then 1 in 8: the time blocked
    # while the side thread computed is contention, out of data_s (main kept it there and
    # read no such field).
    if StackSampler(threading.get_ident())._thread_clock is False:
        pytest.skip("no thread clock")
    record = _loader_loop(_Releases(), _holds_the_gil)
    read = [s for s in record.steps if s.data_contention_s is not None]
    if not read:
        pytest.skip("no schedstat on this system")
    assert len(read) >= 30
    for s in read:
        assert s.data_contention_s is not None and s.data_unqueued_s is not None
        assert 0 <= s.data_contention_s <= s.data_unqueued_s <= (s.data_blocked_s or 0) + 1e-9
    assert sum(s.data_contention_s or 0.0 for s in read) > 0
    kept = blocked_kept(record.steps)
    assert kept is not None and kept < 1.0


def test_a_sleeping_loaders_block_stays_its_data_wait():
    # Differently shaped: no side thread, the loader sleeps 1 ms a sample (a read, a decode).
    # Its block recurs every step and no other thread of ours computes meanwhile: the data
    # wait keeps it (at most the time our own clock reads took goes to contention).
    if StackSampler(threading.get_ident())._thread_clock is False:
        pytest.skip("no thread clock")
    record = _loader_loop(_Sleeps(), None)
    read = [s for s in record.steps if s.data_contention_s is not None]
    if not read:
        pytest.skip("no schedstat on this system")
    blocked = sum(s.data_blocked_s or 0.0 for s in read)
    assert blocked >= 0.5 * len(read) * 0.004  # 4 sleeps of 1 ms a step, up to a late wake
    assert sum(s.data_contention_s or 0.0 for s in read) <= 0.1 * blocked
    assert sum(s.data_s for s in read) >= blocked * 0.9
