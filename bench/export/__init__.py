"""A finished run as a folder the rest of the field reads (``bench export RUN OUT --format hf``), and such a folder
read back as a checkpoint (``bench eval``, ``init_from``)."""
