"""Direct allocation: a Buffer's ``alloc(buf) -> (start_partition, byte_offset)`` built from the
original's allocation-function protocol ``func(block_index, pdim_size, fdim_size)``.

The block index runs over the tensor's block dimensions (the dims before ``par_dim``); one tensor is
one memloc here, so the blocks must land at consecutive free offsets of ``fdim_size`` bytes on the
same partitions (the usual modulo allocation with ``num_free_tiles`` equal to the block counts, or no
block dims at all). Anything else is refused by name instead of being placed wrongly.
"""
import itertools

from neuronxcc.nki import errors as E

BANK_BYTES = 2048


def _blocks(buf):
    return tuple(buf.shape[:buf.pdim])


def resolve(func, buf, psum=False):
    """(start_partition, byte_offset) of BUF under allocation function FUNC."""
    blocks = _blocks(buf)
    P = buf.shape[buf.pdim]
    fbytes = 1
    for d in buf.shape[buf.pdim + 1:]:
        fbytes *= d
    fbytes *= buf.dtype.itemsize
    addrs = []
    for idx in itertools.product(*[range(n) for n in blocks]) if blocks else [()]:
        r = func(tuple(idx), P, fbytes)
        if psum:
            bank, part, addr = (int(x) for x in r)
            addrs.append((part, bank * BANK_BYTES + addr))
        else:
            part, addr = (int(x) for x in r)
            addrs.append((part, addr))
    p0, a0 = addrs[0]
    for k, (p, a) in enumerate(addrs):
        if p != p0 or a != a0 + k * fbytes:
            raise E.NkiNotImplementedError(
                "direct allocation of '%s' whose blocks do not sit at consecutive addresses" % buf.name,
                "block %d at partition %d byte %d" % (k, p, a))
    return p0, a0


def modulo(base, tiles, scale):
    """The original's modulo allocation along one address: base + linearize(idx % tiles) * scale."""
    def f(idx):
        shape = tuple(tiles) if tiles else (1,) * len(idx)
        lin = 0
        for i, s in zip(idx, shape):
            lin = lin * s + (i % s)
        return base + lin * scale
    return f
