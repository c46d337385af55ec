"""Indirect (tensor-valued) indices in load / store: not built yet."""
from neuronxcc.nki import errors as E


def indirect_view(t, key):
    raise E.NkiNotImplementedError("indexing with a tile (indirect load/store)")
