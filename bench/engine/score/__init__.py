"""Scoring a text with a model: ``evaluation`` (the one scorer, stream layouts), ``inference`` (a trained run's
checkpoint scored, sampled), ``marginal`` (the likelihood over every segmentation), ``hf_eval`` (a Hugging Face
model scored the same way) and ``lm_eval_model`` (our runs as lm-evaluation-harness's ``bench`` model).
"""
