"""``ncc.sbuf``: direct SBUF allocation."""
from neuronxcc.nki import errors as E
from neuronxcc.nki.language.buffers import Buffer

__all__ = ["mod_alloc", "alloc", "auto_alloc"]


def mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()):
    """Place the tensor at byte BASE_ADDR of every partition from BASE_PARTITION."""
    if num_par_tiles or num_free_tiles:
        raise E.NkiNotImplementedError("ncc.sbuf.mod_alloc(num_par_tiles/num_free_tiles)")
    return Buffer("sbuf", "SBUF", alloc=lambda buf: (int(base_partition), int(base_addr)))


def alloc(func):
    raise E.NkiNotImplementedError("ncc.sbuf.alloc (allocation functions)")


def auto_alloc():
    return Buffer("sbuf", "SBUF")
