"""A study: a matrix of runs and its report, in three layers, each importing only those below it:
``stats`` (numbers), ``matrix`` (running and recording the runs) and ``report`` (reading both into tables and
figures).
"""
