"""A metric plug-in: bits per line, the total negative log-likelihood `L`
(nats) over the scored text's newlines. Importing it (--plugin
bench_toy_plugin.lines) declares it everywhere a metric reaches."""

from bench.metrics import METRICS, Metric

LINE = Metric(
    "bits_per_line", "bits/line", "bits per line",  # key, label, unit
    lambda c: c.bits_per(c.lines),  # the formula over the counts
    True,  # comparable: per a property of the text, not of its tokens
    "L / (ln 2 · newlines)",  # the report's definition
    name="line", count="lines",  # a figure metric: --metric line
)
METRICS.adopt(LINE.key, LINE)  # refused if another metric has the key
