"""A study: a matrix of runs and its report.

``config`` (the TOML file) -> ``grid`` (cells, matching rules) -> ``plan`` (each cell resolved once) -> ``execute``
(run what is not done, in this process or ``--jobs`` workers (``worker``), or as Slurm jobs (``launch``);
``run_status``) -> the run folders, of which ``runs_table`` writes runs.csv as an index and reads the table the
report uses -> ``analysis``, ``report_tables``, ``figures`` -> ``report`` (``rendering`` writes it as Markdown and
HTML).
"""
