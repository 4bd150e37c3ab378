"""A finished run as a folder the rest of the field reads (``bench export RUN OUT --format hf``); the engine reads
such a folder back as a checkpoint itself (bench.engine.exported)."""
