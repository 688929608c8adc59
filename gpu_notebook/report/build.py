"""Run -> Report: analysis, verdict, findings with their fixes, what-if, and before/after."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.analysis.whatif import what_if
from gpu_notebook.records import Analysis, Report, Run, Verdict
from gpu_notebook.traces.windows import WindowTraces

if TYPE_CHECKING:
    from gpu_notebook.cell.facts import SourceFacts
    from gpu_notebook.cell.live_hooks import HooksAtStart


def decided(run: Run, analysis: Analysis, facts: SourceFacts) -> Verdict:
    """The verdict, with what the rules read of the loop's data: whether its batches are
    assembled from memory, and whether the steps' wait for a core reaches across that line
    (the other side worded: the verdict takes words for the data wait it counts as host work)."""
    from gpu_notebook.analysis.verdict_said import InMemoryHost
    from gpu_notebook.rules.input_pipeline import NoWorkerGain, batch_at_line, data_in_memory
    from gpu_notebook.words.input_pipeline import no_worker_gain

    in_memory = data_in_memory(run, analysis, facts)
    at_line = batch_at_line(analysis, facts)
    if at_line is not None and in_memory is None:
        # As read over the line: the other side's reason, at the least the batch reads.
        other = no_worker_gain(NoWorkerGain(batch_ms=at_line.low_s * 1000))
        at_line = dataclasses.replace(at_line, other=other)
    verdict = decide(
        run,
        analysis,
        data_in_memory=None if in_memory is None else no_worker_gain(in_memory),
        batch_at_line=at_line,
    )
    answer = verdict.answer
    if in_memory is not None and in_memory.whole_batches and isinstance(answer, InMemoryHost):
        # The dataset builds each batch in one call: no per-sample assembly to name or remove.
        verdict = dataclasses.replace(verdict, answer=dataclasses.replace(answer, whole=True))
    return verdict


def build_report(
    run: Run,
    price_per_gpu_hour: float | None = None,
    namespace: Mapping[str, Any] | None = None,
    history: Sequence[Report] = (),
    target_gpu: str | None = None,
    *,
    with_fixes: bool = True,
    namespace_is_source: bool = False,
    hooks_at_start: HooksAtStart | None = None,
) -> Report:
    """Everything the views show. ``namespace`` lets rules read live objects (a DataLoader made
    in an earlier cell); ``history`` holds this session's earlier reports, for the comparison.
    ``namespace_is_source``: the namespace is what ``run.cell_source`` itself bound as it ran (a
    script's globals, ``gpucheck run``), not what came before it (a notebook's earlier cells):
    its objects are said as the script's, and no fix rebuilds one above the source's first line
    (where a script has bound nothing yet).
    On a run without a GPU, ``Report.gpu_estimate`` says what one ``target_gpu`` (default
    ``analysis.gpu_estimate.DEFAULT_GPU``) would make of the step; ValueError if unknown.
    ``with_fixes=False`` leaves the findings without their patched cell (``proposal`` None): for
    a caller that shows only text, which never prints it (libcst is then never imported).
    ``hooks_at_start``: the live modules' hooks as the cell started (``cell.live_hooks``)."""
    from gpu_notebook.analysis.gpu_estimate import estimate_on_gpu, gpu_spec
    from gpu_notebook.cell.syncs import reads_no_cpu_trace_records, untraced_hook_reads
    from gpu_notebook.report.compare import compare, find_baseline, findings_after
    from gpu_notebook.rules import cell_facts, run_rules
    from gpu_notebook.words import word_findings
    from gpu_notebook.words.gpu_estimate import word_estimate
    from gpu_notebook.words.program import report_said_of
    from gpu_notebook.words.proposals import attach_fixes
    from gpu_notebook.words.verdict import word_verdict
    from gpu_notebook.words.window import worded_windows

    gpu_spec(target_gpu)  # an unknown name fails before the work
    run = worded_windows(run)  # the capture hands up what a window covered, not its note
    facts = cell_facts(
        run.cell_source,
        namespace,
        line_offset=run.first_line - 1,
        made_before=not namespace_is_source,
        hooks_at_start=hooks_at_start,
    )
    if facts.live.skipped or facts.live.unread:
        # An object the rules could not read: its findings are missing, and the report says so.
        run = dataclasses.replace(run, notes=(*run.notes, *facts.live.notes()))
    traces = WindowTraces()  # each window's trace decoded once, for every reader below
    analysis = analyze(run, traces)
    verdict = word_verdict(decided(run, analysis, facts))
    findings = run_rules(
        run,
        analysis,
        verdict,
        namespace=namespace,
        line_offset=run.first_line - 1,
        facts=facts,
        traces=traces,
    )
    findings = word_findings(findings)  # the rules hand figures up
    # The fixed cell keeps the %%gpucheck line: running it measures the fix against this run.
    whole_cell = f"{run.magic_line}\n{run.cell_source}" if run.magic_line else run.cell_source
    if with_fixes:
        findings = attach_fixes(
            findings, whole_cell, namespace=namespace, made_before=not namespace_is_source
        )
    report = Report(
        run=run,
        analysis=analysis,
        verdict=verdict,
        findings=findings,
        # One rank of a torchrun job: the what-if starts from the job's real world size.
        whatif=what_if(
            run, analysis, price_per_gpu_hour, world_size=run.rank.world_size if run.rank else 1
        ),
        gpu_estimate=word_estimate(
            estimate_on_gpu(
                run,
                analysis,
                target_gpu,
                traces,
                autocast=facts.autocast,
                # A read the cell makes only on a GPU (`if torch.cuda.is_available():
                # torch.cuda.synchronize()`) is in no CPU trace, yet waits every step there.
                skipped_reads=float(
                    sum(1 for s in facts.syncs if s.cuda_only and s.step_loop_line is not None)
                ),
                # `out.argmax(1).cpu().numpy()` every step: a read on a GPU, no operator here.
                # The same in a hook the framework calls every step (Lightning's
                # on_train_batch_end: `outputs["loss"].cpu()`).
                untraced_reads=float(
                    reads_no_cpu_trace_records(facts.syncs)
                    + untraced_hook_reads(facts.hook_reads)
                    + untraced_hook_reads(facts.registered_hook_reads)
                ),
                # `if torch.rand(()) < p:` a step: a CPU tensor's read, on a GPU too.
                host_factories=facts.host_factories,
                host_reads=float(facts.host_reads),
            )
        ),
    )
    # Worded for a cell above; a script's report says it of the script (words/program.py).
    report = report_said_of(report)
    baseline = find_baseline(history, report)
    if baseline is not None:
        comparison = compare(baseline, report, price_per_gpu_hour=price_per_gpu_hour)
        report = dataclasses.replace(
            report, comparison=comparison, findings=findings_after(baseline, report, comparison)
        )
    return report
