"""Memory buffers (``nl.sbuf``, ``nl.psum``, ``nl.hbm`` = ``nl.private_hbm``, ``nl.shared_hbm``),
``nl.par_dim`` and the SPMD grid helpers ``nl.nc`` / ``nl.spmd_dim``."""
__all__ = ["Buffer", "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "par_dim", "ParDim", "nc", "spmd_dim",
           "for_buf", "grid_size"]


class Buffer:
    """A memory kind, optionally with a direct allocation (``ncc.sbuf.mod_alloc(...)``)."""

    def __init__(self, name, memory, hbm_kind=None, alloc=None):
        self.name = name
        self.memory = memory            # SBUF | PSUM | HBM
        self.hbm_kind = hbm_kind        # shared | private for HBM
        self.alloc = alloc              # callable(buf shape, dtype) -> (start_partition, byte_offset) or None

    def __repr__(self):
        return "nl.%s" % self.name

    def view(self, *a, **k):
        from neuronxcc.nki.errors import NkiNotImplementedError
        raise NkiNotImplementedError("buffer.view")


sbuf = Buffer("sbuf", "SBUF")
psum = Buffer("psum", "PSUM")
private_hbm = Buffer("private_hbm", "HBM", "private")
hbm = private_hbm
shared_hbm = Buffer("shared_hbm", "HBM", "shared")


def for_buf(buf):
    if buf.memory == "SBUF":
        return sbuf
    if buf.memory == "PSUM":
        return psum
    return shared_hbm if buf.kind in ("shared", "input") else private_hbm


class ParDim(int):
    """``nl.par_dim(n)``: marks the partition dimension in a shape."""

    def __new__(cls, n):
        return int.__new__(cls, int(n))

    def __repr__(self):
        return "par_dim(%d)" % int(self)


def par_dim(n):
    return ParDim(n)


class spmd_dim:
    """A grid axis mapped onto NeuronCores: ``nl.spmd_dim(nl.nc(2), 2)`` or ``nl.nc(2) * 2``.
    On one simulated core the instances run serially, so only the total size matters."""

    def __init__(self, *factors):
        n = 1
        for f in factors:
            n *= int(f)
        self.size = n
        self.factors = factors

    def __int__(self):
        return self.size

    __index__ = __int__

    def __mul__(self, o):
        return spmd_dim(self, o)

    __rmul__ = __mul__

    def __repr__(self):
        return "spmd_dim(%s)" % ", ".join(repr(f) for f in self.factors)


class nc(spmd_dim):
    """``nl.nc(n)``: n logical NeuronCores on one grid axis."""

    def __init__(self, n):
        super().__init__(int(n))
        self.cores = int(n)

    def __repr__(self):
        return "nc(%d)" % self.cores


def grid_size(g):
    return int(g.size) if isinstance(g, spmd_dim) else int(g)
