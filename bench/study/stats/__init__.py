"""The study's bottom layer: numbers, no figures and no matrix. ``uncertainty`` (intervals over seeds and over
documents, paired comparisons, Holm), ``analysis`` (unigram floors, loss inside words, the share on ``<unk>``) and
``convergence`` (is a run still improving, where does a ranking change). It reads runs only as they are handed in.
"""
