"""``ncc.psum``: direct PSUM allocation (8 banks of 2 KiB per partition)."""
from neuronxcc.nki.compiler._alloc import modulo, resolve
from neuronxcc.nki.language.buffers import Buffer

__all__ = ["mod_alloc", "alloc", "auto_alloc"]


def alloc(func):
    """Place the tensor where FUNC(block_index, pdim_size, fdim_size) -> (bank, start_partition, byte_addr) says."""
    return Buffer("psum", "PSUM", alloc=lambda buf: resolve(func, buf, psum=True))


def mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(), num_free_tiles=()):
    def func(idx, pdim_size, fdim_size):
        return (modulo(base_bank, num_bank_tiles, 1)(idx), modulo(base_partition, num_par_tiles, pdim_size)(idx),
                modulo(base_addr, num_free_tiles, fdim_size)(idx))
    return alloc(func)


def auto_alloc():
    return Buffer("psum", "PSUM")
