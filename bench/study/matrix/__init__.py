"""The study's middle layer: running a matrix and recording it.

``config`` (the TOML file) -> ``grid`` (cells, matching rules) -> ``plan`` (each cell resolved once) -> ``execute``
(run what is not done, in this process or ``--jobs`` workers (``worker``), or as Slurm jobs (``launch``);
``run_status``, ``eta``) -> the run folders, checked against each other by ``folder_records``, of which
``runs_table`` writes runs.csv as an index and reads each finished run as its record (``finished_run``).
``pretrained`` adds models trained elsewhere, ``records`` carries finished runs between machines as small files
(adopted whole: ``record_checks``), ``reproduce`` trains recorded runs again (what it vouches for:
``reproduce_checks``).
"""
