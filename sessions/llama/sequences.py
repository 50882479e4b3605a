"""The sequence ids of every context: the live one and the spare one.

A context is made with ``n_seq_max = 2`` and a unified KV cache (``context``): the branch
shown is decoded in the live sequence, and a range of it copied into the spare one can be
read or written alone, which is how checkpoints are taken and put back.
"""

LIVE = 0
"""The sequence that holds the branch being read or written."""
SPARE = 1
"""The sequence a token range is copied into, to be saved or loaded on its own."""
SEQUENCES = 2
"""Sequence ids of a context (``n_seq_max``): the live one and the spare."""
