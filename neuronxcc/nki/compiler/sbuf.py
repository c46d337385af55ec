"""``ncc.sbuf``: direct SBUF allocation (``mod_alloc``, ``alloc(func)``, ``auto_alloc``)."""
from neuronxcc.nki.compiler._alloc import modulo, resolve
from neuronxcc.nki.language.buffers import Buffer

__all__ = ["mod_alloc", "alloc", "auto_alloc"]


def alloc(func):
    """Place the tensor where FUNC(block_index, pdim_size, fdim_size) -> (start_partition, byte_addr) says."""
    return Buffer("sbuf", "SBUF", alloc=lambda buf: resolve(func, buf))


def mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()):
    """Modulo allocation from byte BASE_ADDR of every partition from BASE_PARTITION."""
    def func(idx, pdim_size, fdim_size):
        return (modulo(base_partition, num_par_tiles, pdim_size)(idx), modulo(base_addr, num_free_tiles, fdim_size)(idx))
    return alloc(func)


def auto_alloc():
    return Buffer("sbuf", "SBUF")
