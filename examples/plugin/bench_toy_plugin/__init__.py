"""A toy plug-in package for bench: the tokenization ``nibble`` (bench_toy_plugin.nibble) and the model family
``causal-conv`` (bench_toy_plugin.conv), each declared by an entry point in pyproject.toml."""
