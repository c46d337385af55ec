"""Direct allocation: a Buffer's ``alloc(buf)`` built from the original's allocation-function protocol
``func(block_index, pdim_size, fdim_size)``.

The block index runs over the tensor's block dimensions (the dims before ``par_dim``). When every
block lands at consecutive free offsets of ``fdim_size`` bytes on the same partitions (the usual
modulo allocation with ``num_free_tiles`` equal to the block counts, or no block dims) the tensor is
one memloc: ``(start_partition, byte_offset)``. Otherwise (blocks rotating through fewer slots, on
other partitions, at arbitrary addresses) it is ``Blocks``: one placement per block, and the lowering
gives each distinct placement its own memloc (blocks at the same address share it, as on the device).
"""
import itertools

from neuronxcc.nki import errors as E


class Blocks:
    """Per-block placements [(start_partition, byte_offset)] in row-major block order."""

    def __init__(self, places):
        self.places = list(places)

    def __repr__(self):
        return "Blocks(%s)" % (self.places,)


BANK_BYTES = 2048


def _blocks(buf):
    return tuple(buf.shape[:buf.pdim])


def _call(func, idx, pdim_size, fdim_size):
    """func(idx, pdim_size, fdim_size), by keyword when func takes those names (a functools.partial binding
    leading parameters by keyword, as nki-samples' allocated attention passes ``partial(f, bank_map=...)``)."""
    import inspect
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        params = {}
    if all(n in params for n in ("idx", "pdim_size", "fdim_size")):
        return func(idx=idx, pdim_size=pdim_size, fdim_size=fdim_size)
    return func(idx, pdim_size, fdim_size)


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
        r = _call(func, tuple(idx), P, fbytes)
        if psum:
            bank, part, addr = (int(x) for x in r)
            addrs.append((part, bank * BANK_BYTES + addr))
        else:
            part, addr = (int(x) for x in r)
            addrs.append((part, addr))
    p0, a0 = addrs[0]
    if all(p == p0 and a == a0 + k * fbytes for k, (p, a) in enumerate(addrs)):
        return p0, a0
    for k, (p, a) in enumerate(addrs):
        if p < 0 or a < 0 or p + P > 128:
            raise E.err_invalid_argument("direct allocation of '%s': block %d at partition %d byte %d is outside "
                                         "the memory" % (buf.name, k, p, a))
    return Blocks(addrs)


def modulo(base, tiles, scale):
    """The original's modulo allocation along one address: base + linearize(idx % tiles) * scale."""
    def f(idx):
        shape = tuple(tiles) if tiles else (1,) * len(idx)
        lin = 0
        for i, s in zip(idx, shape):
            lin = lin * s + (i % s)
        return base + lin * scale
    return f
