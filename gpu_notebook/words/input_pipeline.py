"""Words of the input pipeline rules (rules/input_pipeline.py)."""

from __future__ import annotations

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import StartUpBursts
from gpu_notebook.rules.input_pipeline import (
    CPU_BUSY_PCT,
    GPU_IDLE_PCT,
    WORKER_BATCH_US,
    WORKER_CPU_FACTOR,
    WORKER_HANDOFF_US,
    CpuSaturated,
    InMemoryBatches,
    LoaderWorkers,
    NoSpareCore,
    NoWorkerGain,
    Reach,
    RemadeLoader,
    SamplerTime,
    SessionShare,
    SlowDataset,
)
from gpu_notebook.words.common import Words, data_wait_evidence, worder, words
from gpu_notebook.words.restart_range import ran_clock_clause

_SOURCE_WORKERS = (
    "TensorBoard profiler plugin profiler/data.py (data > 5% of step: add workers); TraceML "
    "step_time policy (warn 10%, critical 20%); SageMaker Debugger Dataloader rule (workers "
    "70-200% of cores)"
)


def _on_this_machine(floors: float) -> str:
    """Where this machine's small operators moved a reference cost (a tenth or more)."""
    if abs(floors - 1.0) < 0.1:
        return ""
    return f", {floors:.1f}x the measured machine's as this one's smallest operators run"


def no_worker_gain(r: NoWorkerGain) -> str:
    """Why workers would not pay here (the in-memory finding, and the verdict's evidence)."""
    if r.dataset is not None:
        return (
            f"the dataset is a {r.dataset}: its samples are views of tensors already in memory, and a worker "
            "would copy every batch once more through shared memory to hand it over"
        )
    return (
        f"a batch loads in {r.batch_ms or 0.0:.2f} ms, less than a worker's handoff of a batch "
        f"(~{WORKER_HANDOFF_US * r.floors / 1000:.1f} ms{_on_this_machine(r.floors)})"
    )


def _reach(r: Reach) -> list[str]:
    if r.load_us is None:
        return [
            f"gain if the wait is hidden by workers: {fmt_gain(r.bound)} (Amdahl over the data share)"
        ]
    lines: list[str] = []
    if r.cpu_us is not None:
        if r.cpu_us >= 5:  # what rounds to 0.01 ms or more
            cpu_part = (
                f"at least {r.cpu_us / 1000:.2f} ms of it CPU work (from this process's CPU use) "
                f"that {r.wanted} worker(s) share with the rest of the step on {r.cores} core(s)"
            )
        else:  # "at least 0.00 ms" says nothing: the loading waited (reads, sleeps)
            cpu_part = (
                "none of it measurably CPU work (this process's CPU use leaves it to waiting), "
                f"so {r.wanted} worker(s) overlap it freely"
            )
        per = "per batch" if r.batches < 1.5 else f"per step ({r.batches:.3g} batches)"
        lines.append(
            f"{per}: {r.load_us / 1000:.2f} ms of loading in the main process, {cpu_part}; "
            f"the main process still receives each batch "
            f"(~{WORKER_HANDOFF_US * r.floors / 1000:.1f} ms{_on_this_machine(r.floors)})"
        )
    waits = (
        f", today's step counting the {r.wait_us / 1000:.2f} ms it waited for a core after its "
        "loader's sleeps and reads, which workers take off the main process"
        if r.wait_us >= 5  # what rounds to 0.01 ms or more
        else ""
    )
    lines.append(
        f"gain if workers hide the wait: {fmt_gain(r.bound)} (what {r.wanted} worker(s) can reach on this machine{waits})"
    )
    return lines


@worder(InMemoryBatches)
def in_memory_batches(s: InMemoryBatches) -> Words:
    bs = s.batch if s.batch is not None else "B"
    source = (
        "measured: an in-memory TensorDataset with num_workers=2 ran 0.68x on 2 cores; torch.utils.data "
        "docs (batch_size=None with a BatchSampler for batched indexing)"
    )
    if s.in_sampler is not None:
        t = s.in_sampler
        return words(
            "The step waits for the DataLoader's sampler: its __iter__ runs in the main process",
            [
                _data_evidence(s),
                f"{_sampler_at(t)} held {t.samples} of the {t.data_samples} stack samples of "
                "the data wait: the time goes to choosing the indices, not to reading the "
                "dataset's samples",
                "the sampler runs in the main process whatever num_workers is (workers only "
                "read the samples it chose)",
                f"gain if the sampler's time is removed: {fmt_gain(s.bound)} (Amdahl over its "
                "share of the data wait)",
            ],
            ("Keep num_workers=0 and keep your sampler" if s.reason else "Keep your sampler")
            + f": make {_sampler_at(t)} draw the "
            "epoch's indices in one call instead of one call per index (e.g. one "
            "`torch.multinomial(weights, num_samples, replacement=True)` or "
            "`random.choices(population, weights, k=num_samples)`, then yield from it).",
            "torch.utils.data docs (the sampler is iterated in the main process; workers get "
            "its indices); the stack sampler's samples under the DataLoader's __next__",
        )
    assert s.reason is not None  # the rule gives a reason wherever the sampler does not speak
    if s.unsure is not None:
        u = s.unsure
        held = (
            f"your sampler's `{u.function}` held {u.samples} of the {u.data_samples} stack "
            "samples of the data wait: too few to tell whether choosing the indices (the "
            "sampler) or reading and collating the samples (the dataset) holds most of it"
            if u.data_samples
            else f"no stack sample of the data wait: it cannot tell your sampler's "
            f"`{u.function}` from the dataset's reads"
        )
        return words(
            "The step waits for data already in memory: cannot tell whether your sampler or "
            "the dataset's reads hold the wait",
            [_data_evidence(s), no_worker_gain(s.reason), held],
            "Rerun with `--lines all` (stack samples over the whole run) to tell which holds "
            f"the wait. If the dataset's reads: {_whole_batches(s, bs)} If the sampler: keep it "
            f"and make `{u.function}` draw the epoch's indices in one call instead of one call "
            "per index.",
            source,
        )
    return words(
        "The step waits for data already in memory: workers would cost more than they save",
        [
            _data_evidence(s),
            no_worker_gain(s.reason),
            "the time goes to indexing the dataset one sample at a time and collating the samples",
            f"gain if the batch is taken in one indexing: {fmt_gain(s.bound)} (Amdahl over the data share)",
        ],
        _whole_batches(s, bs),
        source,
    )


def _sampler_at(t: SamplerTime) -> str:
    where = f"line {t.first_line}" if t.filename == "cell" else f"{t.filename}:{t.first_line}"
    hot = f"; line {t.hot_line} `{t.hot_text}`" if t.hot_line is not None else ""
    return f"the sampler's `{t.function}` ({where}{hot})"


def _whole_batches(s: InMemoryBatches, bs: int | str) -> str:
    """How to index whole batches: a TensorDataset takes a list of indices as it is; a dataset
    of the user's own class (one sample per ``__getitem__``, maybe a collate_fn that pads) does
    not, and the DataLoader calls its ``__getitems__`` with a batch's indices where it has one.
    The batches keep the loader's order (shuffle), its own sampler or batch sampler (issue 26:
    the advice must not drop the user's balancing sampler) and last batch (drop_last), and the
    loop form takes every tensor the dataset holds (``ds.tensors``): the advice changes no batch
    unsaid. With a sampler of the user's the loop form, which draws its own order, is left out."""
    if s.reason is not None and s.reason.dataset is not None:
        ds = s.dataset or "ds"
        sampler = f"RandomSampler({ds})" if s.shuffle else f"SequentialSampler({ds})"
        if s.shuffle is None:
            sampler = f"RandomSampler({ds}) (SequentialSampler({ds}) without shuffle)"
        drop = (
            "drop_last=<your DataLoader's>" if s.drop_last is None else f"drop_last={s.drop_last}"
        )
        head = "Keep num_workers=0 and index whole batches:"
        tail = "(a TensorDataset takes a list of indices)"
        if s.batch_sampler is not None:
            return (
                f"{head} DataLoader({ds}, sampler={s.batch_sampler}, batch_size=None) {tail}: "
                "your batch sampler still chooses each batch."
            )
        if s.sampler is not None:
            return (
                f"{head} DataLoader({ds}, sampler=BatchSampler({s.sampler}, batch_size={bs}, "
                f"{drop}), batch_size=None) {tail}: your sampler still chooses the indices."
            )
        order = "arange" if s.shuffle is False else "randperm"
        skip = (
            f", skipping an `idx` shorter than {bs} as drop_last=True does" if s.drop_last else ""
        )
        return (
            f"{head} DataLoader({ds}, sampler=BatchSampler({sampler}, "
            f"batch_size={bs}, {drop}), batch_size=None) {tail}, or "
            f"`for idx in torch.{order}(len({ds})).split({bs}): batch = [t[idx] for t in {ds}.tensors]`{skip}."
        )
    return (
        "Keep num_workers=0: a batch loads in less time than a worker takes to hand it over. To "
        "shorten it, give the dataset a `__getitems__(self, indices)` that builds the batch's "
        "samples in one go (the DataLoader calls it with each batch's indices, then your "
        "collate_fn); workers would add their handoff to every batch."
    )


def _data_evidence(s: LoaderWorkers | InMemoryBatches) -> str:
    whole = s.whole
    if whole is None:
        return data_wait_evidence(s.data, s.phases)
    line = (
        f"waiting for the next batch: {fmt_share(s.data)} of the step time over {whole.steps} "
        "steps (step clock, outside the profiled window)"
    )
    if s.profiled is not None and abs(s.profiled - s.data) >= 0.01:
        line += f"; the profiled window read {fmt_share(s.profiled)}"
    return line


def _where(s: LoaderWorkers) -> str:
    static, live, hook = s.static, s.live, s.hook
    if static is not None:
        where = f"DataLoader on line {static.line}"
        if static.name:
            where += f" (`{static.name}`)"
    elif live is not None:
        # A script's global made by a call the reading does not see into (a helper of its own
        # or of a library): the object is read, its making is not an earlier cell's.
        made = (
            ("made by a call of the script" if not live.made_before else "built in an earlier cell")
            if live.made_in is None
            else f"built in In[{live.made_in}]"
        )
        where = (
            f"`{live.name}`, a DataLoader {made} over {live.dataset_type}"
            + (f" ({live.dataset_len} items)" if live.dataset_len is not None else "")
            + f", batch_size={live.batch_size}"
        )
    elif hook is not None:
        if hook.kind == "hf-trainer":
            where = f"the DataLoader the Hugging Face Trainer `{hook.name}` builds (args.dataloader_num_workers)"
        else:
            held = f" (num_workers=self.{hook.workers_attribute})" if hook.workers_attribute else ""
            where = f"the DataLoader `{hook.name}.train_dataloader()` builds ({hook.type_name}, Lightning){held}"
    else:
        where = "the DataLoader (not built in this cell and not found in the namespace)"
    return where + (" (as its iterator ran)" if s.as_iterated else "")


def _workers_steps(n: NoSpareCore) -> str:
    """The figures of ``NoSpareCore``: the main process's part, the workers' CPU work, and the
    step they leave with no overlap and with full overlap."""
    per = "a batch" if n.batches < 1.5 else f"a step ({n.batches:.3g} batches)"
    return (
        f"with workers the main process still spends {n.main_us / 1000:.2f} ms "
        f"{per} on the rest of the step and receiving {n.tensors} tensor(s) a batch, and the "
        f"workers {n.workers_us / 1000:.2f} ms of CPU (the loading at {WORKER_CPU_FACTOR:g}x the "
        f"main process's time, ~{WORKER_BATCH_US * n.floors / 1000:.1f} ms a tensor to put each batch in "
        f"shared memory); on {n.parallel} of {n.cores} core(s) that is a step of "
        f"{n.fastest_us / 1000:.2f} ms packed beside the main process's part to "
        f"{n.slowest_us / 1000:.2f} ms after it, against {n.step_us / 1000:.2f} ms today"
    )


def no_spare_core(n: NoSpareCore) -> str:
    """Why workers may make the step slower: the figures of ``NoSpareCore``."""
    return (
        f"no core is spare: {_workers_steps(n)}; the middle, {n.expected_us / 1000:.2f} ms, is "
        f"not shorter by more than two runs of the same code differ ({RUN_TO_RUN:.0%}): workers "
        "may make it slower"
    )


def slower_low_end(n: NoSpareCore) -> str:
    """Why an offered workers fix's low end is under 1x: the figures of ``NoSpareCore``."""
    return (
        f"low end under 1x: {_workers_steps(n)}; how much of their work overlaps the main "
        "process's is the machine's load of the moment (the middle, "
        f"{n.expected_us / 1000:.2f} ms, is shorter by more than {RUN_TO_RUN:.0%}: offered)"
    )


def session_share(n: SessionShare) -> str:
    """What the CPU this process's session got leaves for workers: the figures of
    ``SessionShare``."""
    return (
        f"{n.idle:.1f} of {n.cores} core(s) were idle while the steps ran and this process used "
        f"{n.ours:.2f} (its thread waited for a core {n.wait:.0%} of the time): workers forked "
        f"from it share its session's CPU, at most {n.capacity:.2f} core(s) with the idle ones, "
        f"with the loop; the main process's part and the workers' CPU work, "
        f"{n.cpu_us / 1000:.2f} ms a step, take {n.step_us / 1000:.2f} ms there against "
        f"{n.wall_us / 1000:.2f} ms today by the wall clock ({n.gain:.2f}x)"
    )


@worder(LoaderWorkers)
def loader_workers(s: LoaderWorkers) -> Words:
    workers, cores = s.workers, s.cores
    evidence = [_data_evidence(s)]
    if workers is None:
        evidence.append(f"{_where(s)}: its num_workers is not known")
    else:
        evidence.append(f"{_where(s)}: num_workers={workers}, {cores} CPU core(s) on this machine")
    if s.live is not None and not s.live.pin_memory and s.gpu:
        evidence.append(f"`{s.live.name}` does not pin memory (pin_memory=False)")
    evidence += _reach(s.reach)
    d = s.in_dataset
    if d is not None:
        evidence.append(
            f"the dataset's own code holds {d.samples} of the data wait's {d.data_samples} "
            f"samples, the most on line {d.line} `{d.text}` in `{d.function}` ({d.line_samples})"
        )
        if d.same_file is not None:
            evidence.append(
                f"line {d.line} loads `{d.same_file}` whole on every item: its path does not "
                "depend on the index, so each item decodes the same file again to keep one row of it"
            )
    # Where the item is made, for the advice to make it cheaper (none: the wait was not
    # sampled in the dataset's code); a file loaded whole for every item comes first.
    where = (
        f"load `{d.same_file}` once in __init__, line {d.line} in `{d.function}` decodes it "
        "whole for every item; else "
        if d is not None and d.same_file is not None
        else f"line {d.line} in `{d.function}` holds most of the wait: "
        if d is not None
        else ""
    )
    if s.item_bound is not None and s.item_located and d is not None:
        evidence.append(
            f"the dataset's own code holds {d.samples} of the data wait's {d.data_samples} stack "
            f"samples, {fmt_share(s.item_share)} of the step: making each item cheaper gives up "
            f"to {s.item_bound:.2f}x with no core more"
        )
    elif s.item_bound is not None:
        evidence.append(
            f"the loading in the main process holds {fmt_share(s.item_share)} of the step: making "
            f"it cheaper (each item, or whole batches at once) gives up to {s.item_bound:.2f}x "
            "with no core more; too few stack samples fell in the dataset's code to say which "
            "part of it"
        )
    if s.no_spare is not None:
        evidence.append(no_spare_core(s.no_spare))
        return words(
            "The step waits for data loaded in the main process, and no core is spare for workers",
            evidence,
            f"Not offered: num_workers={s.wanted} may make the step slower here. Keep num_workers=0 "
            f"and make each item cheaper ({where}vectorise its Python loop with torch ops, cache "
            "items that are the same every epoch, build whole batches at once in a __getitems__), or "
            "run it where cores are free for workers.",
            _SOURCE_WORKERS + "; measured: python_items, a per-item Python loader, ran 0.91x with "
            "2 workers on 2 cores",
        )
    if s.busy and s.share is not None:
        evidence.append(f"may not help on this machine now: {session_share(s.share)}")
        return words(
            "The step waits for data loaded in the main process; workers may not help on this "
            "machine now",
            evidence,
            f"Not offered: num_workers={s.wanted} may not help on this machine now: "
            f"{s.share.idle:.1f} of {s.share.cores} core(s) were free, and the workers' CPU "
            "work would share this process's CPU with the loop. Run the report again when "
            f"cores are free, or keep num_workers=0 and make each item cheaper ({where}vectorise "
            "its Python loop with torch ops, cache items that are the same every epoch).",
            _SOURCE_WORKERS + "; measured: python_items and zip_two_loaders with 2 workers on "
            "2 busy cores, 0.70x-1.40x and 0.84x-1.63x",
        )
    if s.low is not None:
        evidence.append(
            f"range: {fmt_gain(s.reach.bound, s.low)} (low end: the least data wait the run's steps support, "
            f"{fmt_share(s.whole.low_share if s.whole else None)} of the step, 90% interval, all of "
            f"its loading CPU work, done by {s.wanted} worker(s) at a worker's cost ({WORKER_CPU_FACTOR:g}x "
            f"the main process's time and ~{WORKER_BATCH_US * s.reach.floors / 1000:.1f} ms a batch to collate into "
            "shared memory and queue it) after the main process's part of the step, not beside it; "
            f"high end: the run's wait, as little of it CPU work as this process's CPU use allows, "
            f"shared with the rest of the step on {s.reach.cores} core(s))"
        )
    if s.slower is not None:
        evidence.append(slower_low_end(s.slower))
    if s.share is not None:
        evidence.append(f"low end set by the CPU this machine left: {session_share(s.share)}")
    if s.session is not None:
        c = s.session
        evidence.append(
            f"low end capped at {c.reach:.2f}x: this process used {c.ours:.2f} core(s) while the "
            f"steps ran and its session can count on {c.session:.2f} (others used {c.others:.2f} "
            f"of {c.cores}; its thread waited for a core {c.wait:.0%} of the time); workers "
            "forked from it share that, they do not add to it"
            + (
                f"; torch ran {c.torch_threads} intra-op threads in it and a worker runs torch "
                "with 1: what those threads spent on the loading may not stay, so the fix may "
                "reach well above this low end"
                if c.torch_threads is not None and c.torch_threads > 1
                else ""
            )
        )
    title = (
        "The step waits for data: the DataLoader loads batches in the main process"
        if workers == 0
        else f"The step waits for data: {workers} DataLoader worker(s) for {cores} cores"
        if workers is not None
        else "The step waits for data"
    )
    fix = (
        f"Use num_workers={s.wanted} (70% of {cores} cores"
        + (f"; num_workers={workers} now" if workers is not None else "")
        + "), persistent_workers=True"
        + (", pin_memory=True" if s.pin else "")
        + "; workers prepare the next batches while the model trains."
        + (
            f" Line {d.line} in `{d.function}` makes most of each item: a cheaper item shortens "
            "the wait with or without workers."
            if d is not None and d.same_file is None
            else f" First, load `{d.same_file}` once (in __init__) and index it in "
            f"`{d.function}`: line {d.line} reads and decodes the whole file for every item, "
            "and workers would only spread that over more processes."
            if d is not None
            else ""
        )
    )
    if s.unsplit_stream:
        evidence.append(
            "the loader reads an IterableDataset whose code never calls "
            "torch.utils.data.get_worker_info() and no worker_init_fn is given: torch copies it "
            "into every worker and each would yield all of its items (no patch offered)"
        )
        fix = (
            "First split the stream by worker: in __iter__, read "
            "torch.utils.data.get_worker_info() and yield only the items of worker id (every "
            "num_workers-th one), or pass a worker_init_fn that does; as it stands each worker "
            "would yield every item, once per worker. Then: " + fix
        )
    return words(title, evidence, fix, _SOURCE_WORKERS)


@worder(SlowDataset)
def slow_dataset(s: SlowDataset) -> Words:
    if s.steady is not None and s.idle == "ahead":
        return _steady_handoff(s, s.steady)
    waiting = s.waiting_cpu_pct
    evidence = [
        data_wait_evidence(s.data, s.phases) if s.steady is None else _steady_wait(s.steady),
        f"already {s.workers} worker(s) for {s.cores} core(s): adding more would compete for the same cores"
        if waiting is None
        else f"num_workers={s.workers} now, and the workers used {waiting:.0f}% of a core in all: "
        "they wait (storage, a remote store), they do not compute",
    ]
    if s.live is not None:
        evidence.append(f"dataset: {s.live.dataset_type}, batch_size={s.live.batch_size}")
    fix = (
        "Make each sample cheaper: cache decoded/transformed samples that are the same every "
        "epoch, pre-serialize or memory-map the data, move augmentation to the GPU."
        if waiting is None
        else f"More workers overlap that wait without competing for the cores: "
        f"num_workers={2 * s.workers}; or read the samples in bulk, or cache them locally."
    )
    if s.persistent_off:
        fix += " Set persistent_workers=True so workers are not restarted every epoch."
    if waiting is not None and s.idle in ("ahead", "busy"):
        return _idle_workers(s, waiting, evidence[0])
    return words(
        "The step waits for data although the DataLoader has workers: "
        + ("the dataset is slow" if waiting is None else "they wait for their samples"),
        evidence,
        fix,
        "TraceML step_time policy (input wait warn 10%, critical 20%); SageMaker Debugger "
        "Dataloader rule (70-200% of cores); seed articles (cache transforms, mmap: 14x in one case)",
    )


def _steady_wait(b: StartUpBursts) -> str:
    low, high = b.steady_data_share_low or 0.0, b.steady_data_share_high or 0.0
    return (
        f"waiting for the next batch in the loader's steady steps (each start's first "
        f"{b.burst_steps} step(s) left out: the start-up is the finding on the loader made "
        f"anew): {fmt_share(b.steady_data_share or 0.0)} of their time (90% interval "
        f"{fmt_share(low)}-{fmt_share(high)}, {b.steady_steps} steps)"
    )


def _steady_handoff(s: SlowDataset, b: StartUpBursts) -> Words:
    """The steady steps of a loader made anew wait no longer than a batch's handoff."""
    least = (s.wait_us or 0.0) / 1000
    line = (s.handoff_line_us or WORKER_HANDOFF_US) / 1000
    median = (b.steady_data_s or 0.0) * 1000
    evidence = [
        _steady_wait(b),
        f"the median steady step waits {median:.2f} ms for its batch, {least:.2f} ms less "
        f"its wait for a core: within receiving a batch a worker has ready "
        f"(~{WORKER_HANDOFF_US * s.floors / 1000:.1f} ms; {line:.2f} ms with what two runs of this code "
        "differ by here): between start-ups the workers keep up",
    ]
    return words(
        "Between the loader's start-ups the step's data wait is the handoff of ready batches",
        evidence,
        "Nothing to change in the workers between start-ups: the waits are the loader made "
        "anew each epoch (its own finding). Fewer, larger batches pay the handoff less often.",
        "measured: the steps between loader starts, their data wait and wait for a core",
    )


def _idle_workers(s: SlowDataset, cpu_pct: float, wait: str) -> Words:
    """Workers that do not compute, where nothing measured says what they wait for."""
    evidence = [
        wait,
        f"num_workers={s.workers} now, and the workers used {cpu_pct:.1f}% of a core in all: "
        "they do not compute",
    ]
    if s.idle == "ahead":
        per_step = f"{s.wait_us / 1000:.2f} ms" if s.wait_us is not None else "the wait"
        evidence.append(
            f"the step's data wait ({per_step} a step) is no longer than receiving a batch a "
            f"worker has ready (~{WORKER_HANDOFF_US * s.floors / 1000:.1f} ms"
            f"{_on_this_machine(s.floors)}): the workers are ahead of the step"
        )
        title = "The step's data wait is the handoff of batches the workers have ready"
        fix = (
            "Nothing to change in the workers: they keep up. The wait is receiving each batch "
            "from a worker process; fewer, larger batches pay it less often."
        )
    else:
        machine = f"{s.machine_pct:.0f}%" if s.machine_pct is not None else "fully"
        evidence.append(
            f"the machine's cores were {machine} busy: workers that do not compute may be "
            "waiting for a core, not for their samples; which one was not measured"
        )
        title = "The step waits for data while the workers barely run and the machine is busy"
        fix = (
            "Measure on a machine with spare cores before changing the loader: more workers "
            "would compete for the same cores."
        )
    return words(
        title, evidence, fix, "measured: the workers' CPU, the machine's CPU, the data wait"
    )


@worder(CpuSaturated)
def cpu_saturated(s: CpuSaturated) -> Words:
    evidence = [
        f"in {fmt_share(s.fraction)} of {s.samples} samples the CPUs were > {CPU_BUSY_PCT:.0f}% busy "
        f"while the GPU was < {GPU_IDLE_PCT:.0f}% utilized",
    ]
    if s.children_cpu is not None:
        evidence.append(
            f"DataLoader workers (child processes) used {s.children_cpu:.0f}% CPU on average (100% = one core)"
        )
    if s.data is not None:
        evidence.append(data_wait_evidence(s.data, where=False))
    else:
        evidence.append("data wait: not measured")
    return words(
        "The CPUs are saturated preparing data while the GPU idles",
        evidence,
        "Move augmentation to the GPU, cache preprocessed samples, or use a machine with more "
        "CPU cores per GPU; more GPUs would idle the same way.",
        "SageMaker Debugger CPUBottleneck rule (GPU < 10% while CPU > 90% for > 50% of the run)",
    )


@worder(RemadeLoader)
def remade_loader(s: RemadeLoader) -> Words:
    at = s.at
    made = (
        f"`{at.function}()` builds a new DataLoader (line {at.call.line}) each time the loop on "
        f"line {at.step_line} calls it, once per pass of the loop on line {at.outer_line}"
        if at.function is not None
        else f"the DataLoader on line {at.call.line} is made anew on every pass of the loop on "
        f"line {at.outer_line}, around the step loop on line {at.step_line}"
    )
    evidence = [
        made,
        f"each new loader starts its {s.workers} worker process(es) again and its first batch "
        "waits for them; persistent_workers keeps the workers of one loader between its own "
        "passes only, not those of a loader made anew",
    ]
    stalls, bursts = s.stalls, s.bursts
    if bursts is not None and s.bound is not None:
        per_start = bursts.excess_s / max(1, bursts.starts) * 1000
        evidence.append(
            f"over {bursts.starts} loader starts, each start's first {bursts.burst_steps} "
            f"step(s) took {per_start:.1f} ms more than the same loader's steady step "
            f"({bursts.steady_median_s * 1000:.2f} ms, its median): "
            f"{fmt_share(bursts.share)} of the run's step time{ran_clock_clause(bursts)} (from "
            f"{fmt_share(bursts.share_low)}, its 90% interval on either clock); with the slower steps after "
            f"each burst (the first half of each loader's pass over its second half's median "
            f"step) {fmt_share(bursts.reach_share or bursts.share)} (up to "
            f"{fmt_share(bursts.share_high)}); gain if the start-up goes: "
            f"{fmt_gain(s.bound, s.low)} (Amdahl over those shares; the machine's stalls "
            "elsewhere in the epochs are not counted)"
        )
    elif bursts is not None:
        evidence.append(
            f"over {bursts.starts} loader starts, the first {bursts.burst_steps} step(s) took "
            "no longer than the same loader's steady steps: the start-up's cost was not seen"
        )
    elif stalls is not None:
        evidence.append(
            f"the run's steps stall every {stalls.period_steps} steps ({stalls.count} stalls, "
            f"median {stalls.median_stall_s * 1000:.1f} ms): {fmt_share(stalls.share)} of the "
            f"run's step time over its median step; gain if the start-up goes: "
            f"{fmt_gain(s.bound)} (Amdahl over that share)"
        )
    else:
        evidence.append(
            "its cost was not read: no stall at the loader's period stood out of the run's steps"
        )
    name = at.call.name or "loader"
    where = (
        f"create it once before line {at.outer_line} (`{name} = DataLoader(..., "
        f"num_workers={s.workers}, persistent_workers=True)`) and iterate that loader in "
        f"every pass"
    )
    if at.function is not None:
        where += f", instead of `{at.function}()` building a new one"
    fix = (
        f"Build the loader once: {where}; its workers then start once and keep going between "
        "epochs (shuffle=True still reshuffles every epoch)."
        if s.patched
        else f"No patch (the loader's arguments may depend on the loop; moving it is yours): "
        f"{where}; its workers then start once and keep going between epochs."
    )
    return words(
        "The DataLoader is made anew every epoch: its workers start again each time",
        evidence,
        fix,
        "torch.utils.data docs (persistent_workers: workers kept alive after a dataset has been "
        "consumed once, for the same DataLoader instance)",
    )
