"""The training engine: from a spec to a result.

``spec`` (what a run is) -> ``resolve`` (the frozen run configuration, with ``presets``
and the data's facts) -> ``run`` (execute: ``layout`` of the text, ``trainer`` with its
``budget``, ``optim``, ``checkpoint`` and ``device``; ``evaluation`` of the whole splits)
-> ``result`` (the typed result.json). ``score/`` scores texts with models (the one scorer, checkpoints,
lm-evaluation-harness), ``hardware/`` says what a run runs on (device, precision, CUDA graphs, processes, memory);
``speed`` and ``profile`` measure the step and the scorer (``bench speed``); ``describe`` sizes models.
"""
