"""The ``bench`` commands, one module per group: data, tokenize, runs (train, eval, sample, speed),
models (describe) and study (run-matrix, report). ``cli.py`` assembles them.

Each command imports what it needs when it runs, so ``bench --help`` stays fast (no torch).
"""
