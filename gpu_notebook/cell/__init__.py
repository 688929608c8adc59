"""The user's cell, read once: its source (IPython lines hidden), the facts found in it, and the
live objects of the namespace behind the names it reads.

Rules read the facts (``facts.SourceFacts``, built by ``scan.scan_source``); fixes edit the same
cell behind the same IPython door (``ipython``) with the same name helpers and word lists
(``names``, ``words``). Nothing here imports rules, fixes or analysis.
"""
