"""Helpers for hand-written BIR test programs: HBM in -> SBUF tiles -> op -> HBM out."""
import numpy as np

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy import dtypes as D
from neuronxcc.starfish.birsim import simulate


class Prog:
    """Build a one-core program around tiles. Tiles are [P, F] on chip."""

    def __init__(self, name="t", target="trn1"):
        self.m = B.Module(name, target)
        self.b = B.Builder(self.m)
        self.inputs = []
        self.n = 0

    def tile(self, name, parts, free, dtype="float32", memory="SBUF"):
        nb = max(free * D.itemsize(dtype), 4)
        self.m.add_memloc(name, memory, parts, nb)
        return B.AccessPattern(name, dtype, 0, [[1, free]], 0, parts)

    def load(self, name, x, dtype=None, memory="SBUF"):
        """Input tensor NAME_hbm from x ([P, F] or [P]); a tile NAME filled by DMA (cast to dtype)."""
        x = np.asarray(x)
        if x.ndim == 1:
            x = x.reshape(-1, 1)
        p, f = x.shape
        hdt = D.from_numpy(x.dtype)
        self.m.add_tensor(name + "_hbm", "input", hdt, x.shape)
        self.inputs.append(x)
        t = self.tile(name, p, f, dtype or hdt, memory="SBUF")
        self.b.inst("dma_copy", "SP", [t], [self.b.ap(name + "_hbm")], queue="qin")
        if memory == "PSUM":
            ps = self.tile(name + "_ps", p, f, dtype or hdt, memory="PSUM")
            self.b.inst("tensor_copy", "DVE", [ps], [t])
            return ps
        return t

    def store(self, ap, name=None, dtype=None):
        """Output tensor from an on-chip AP (PSUM goes through an SBUF copy)."""
        self.n += 1
        name = name or "out%d" % self.n
        if self.m.memory_of(ap) == "PSUM":
            t = self.tile(name + "_sb", ap.num_partitions, ap.free_size, ap.dtype)
            self.b.inst("tensor_copy", "DVE", [t], [ap])
            ap = t
        dtype = dtype or ap.dtype
        self.m.add_tensor(name, "output", dtype, (ap.num_partitions, ap.free_size))
        self.b.inst("dma_copy", "SP", [self.b.ap(name)], [ap], queue="qout")
        return name

    def inst(self, *a, **k):
        return self.b.inst(*a, **k)

    def run(self, verify=True, **kw):
        self.m.renumber()
        if verify:
            B.verify(self.m)
        self.result = simulate(self.m, self.inputs, **kw)
        return self.result.outputs

    def run1(self, **kw):
        return self.run(**kw)[0]


def rand(shape, seed=0, lo=-2.0, hi=2.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)
