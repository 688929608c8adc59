"""Analysis of a recorded run: figures, never drawings or sentences.

From a ``Run`` and the report's decoded traces (``traces.WindowTraces``, each window's file
decoded once) to the ``Analysis`` record: the phases of each step, the GPU timeline, the top
operators, the run's shape over all its steps, the host overhead, the machine's load, the
verdict and the what-if. Rules read these figures and never compute them; views draw and word
them. The sentences still built here (the verdict's headline and evidence) are counted by
tests/test_rules_never_word.py, and the count only falls."""
