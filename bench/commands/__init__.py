"""The ``bench`` commands, one module per group: data, tokenize, runs (train, eval, sample, speed),
models (describe), study (run-matrix, report) and records (export, documents). ``cli.py`` assembles them.

Each command imports what it needs when it runs, so ``bench --help`` stays fast (no torch).
"""
