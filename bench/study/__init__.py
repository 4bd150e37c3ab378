"""A study: a matrix of runs and its report.

``config`` (the TOML file) -> ``grid`` (cells, matching rules) -> ``plan`` (each cell
resolved once) -> ``execute`` (run what is not done; ``run_status``) -> ``runs_table``
(runs.csv) -> ``analysis``, ``report_tables``, ``figures`` -> ``report`` (``document``
renders it as Markdown and HTML).
"""
