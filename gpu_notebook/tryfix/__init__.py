"""``gpucheck run --try-fixes``: apply each offered fix to a private copy of the script, run
it interleaved with the script as it is, and say from the measured step times whether the fix
delivered.

Stages, one module each: ``plan`` (the report's offered fixes -> variants), ``child`` (runs one
variant in a fresh process and stops it at a step boundary), ``trials`` (the interleaved runs
under a time budget), ``samples`` (step-time samples -> speedup, spread, verdict),
``sequential`` (when a fix has been measured enough), ``distributed`` (the same under
torchrun) and ``cli_hook`` (the options, and the step after the report); the views word the
outcome (``views/tryfix_text.py``). The user's files are never written: patched copies live in
a 0700 scratch folder that is removed when the trials end.
"""

# Here, not in trials.py: ``gpucheck run``'s parser shows it in --try-rounds' help, and importing
# trials (with plan and samples) for it cost every run ~2.5% of its extra import time (issue 27).
DEFAULT_ROUNDS = 3  # runs per arm: a verdict needs every round to agree
# The time a trial run's measured steps should cover (``plan.run_size``; here for --try-fixes'
# help, as DEFAULT_ROUNDS).
RUN_STEPS_S = 1.0
