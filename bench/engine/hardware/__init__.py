"""What a run runs on: ``device`` (choosing and configuring it), ``precision`` (the precision policy),
``cuda_graphs``, ``distributed`` (several processes) and ``memory`` (what fits): below the rest of the engine, which
they never import (``bench speed``, which measures the engine's step and scorer, is ``bench.engine.speed``).
"""
