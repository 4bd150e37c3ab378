"""Fair language-model comparison across tokenizations.

Sub-modules are imported on demand so that light commands (``bench --help``,
``bench data list``) never pay for torch.
"""

__version__ = "0.1.0"
