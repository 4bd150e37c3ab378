"""The training engine: from a spec to a result.

``spec`` (what a run is) -> ``resolve`` (the frozen run configuration, with ``presets``
and the data's facts) -> ``run`` (execute: ``layout`` of the text, ``trainer`` with its
``budget``, ``optim``, ``checkpoint`` and ``device``; ``evaluation`` of the whole splits)
-> ``result`` (the typed result.json). ``inference``, ``describe`` and ``speed`` use
trained or sized models.
"""
