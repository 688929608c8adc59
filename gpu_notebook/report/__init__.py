"""Reports: build one from a Run (``build``: analysis, rules, their words, fixes), compare it
with an earlier report of the same cell (``compare``), make one from a trace file
(``from_trace``), and read a torchrun job's ranks as one job (``job``, ``one_job``);
``consistency`` checks a report against itself for the tests."""
