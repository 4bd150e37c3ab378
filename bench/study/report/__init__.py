"""The study's top layer: reading a matrix's runs (bench.study.matrix) and their numbers (bench.study.stats) into
a report. ``report`` builds it from ``report_tables``, ``figures`` and ``convergence_figure`` (drawn in
``figure_style``), ``flags``, ``compressor_rows`` and ``report_appendix``; ``rendering`` writes it as Markdown and
HTML, ``export`` its tables as CSV and LaTeX; ``compare`` sets two runs or two matrices side by side.
"""
