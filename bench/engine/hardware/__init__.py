"""What a run runs on: ``device`` (choosing and configuring it), ``precision`` (the precision policy),
``cuda_graphs``, ``distributed`` (several processes), ``memory`` (what fits) and ``speed`` (``bench speed``).
"""
