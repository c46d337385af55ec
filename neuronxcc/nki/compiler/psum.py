"""``ncc.psum``: direct PSUM allocation (8 banks of 2 KiB per partition)."""
from neuronxcc.nki import errors as E
from neuronxcc.nki.language.buffers import Buffer

__all__ = ["mod_alloc", "alloc", "auto_alloc"]

BANK_BYTES = 2048


def mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(), num_free_tiles=()):
    if num_bank_tiles or num_par_tiles or num_free_tiles:
        raise E.NkiNotImplementedError("ncc.psum.mod_alloc(num_*_tiles)")
    return Buffer("psum", "PSUM", alloc=lambda buf: (int(base_partition), int(base_bank) * BANK_BYTES + int(base_addr)))


def alloc(func):
    raise E.NkiNotImplementedError("ncc.psum.alloc (allocation functions)")


def auto_alloc():
    return Buffer("psum", "PSUM")
