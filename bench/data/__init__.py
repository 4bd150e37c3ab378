"""The data layer: corpora on disk, from their official source to encoded token ids.

* ``corpora``: the registry of known corpora, their official sources and checksums.
* ``paths``: where the data folder and the offline mirror are.
* ``integrity``: checking a file against its official size and checksums.
* ``manifest``: each corpus's ``manifest.json``, one record per split file.
* ``fetch``: obtaining a registry corpus from a mirror, a file or the official download.
* ``user``: the user's own corpora and prefixes cut from fetched ones.
* ``store``: verifying, listing and opening the splits in the data folder.
* ``cache``: trained tokenizers and encoded splits, keyed by content hashes.
* ``facts``: what a run needs to know about its data (vocabulary, characters per token, identity).
* ``tokenize_stats``: ``bench tokenize stats``, every scheme on every split of one corpus.
"""
