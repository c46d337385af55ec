"""BIR emission helpers for Penguin codegen: names, memlocs, tiled loop nests.

``Emitter`` wraps ``birpy.Builder``. It hands out unique names, creates
UNALLOCATED memlocs (walrus places them), builds access patterns, and emits
tiled loop nests whose partial last tiles are peeled into separate bodies,
so every instruction has static partition counts and free sizes while the
loop trip counts carry the tensor sizes (loops stay loops: the instruction
count depends on the graph, not on the tensor sizes).

Tile choice (``choose_tile``) prefers a divisor of the extent close to the
limit, so most shapes need no peeled remainder at all.
"""
from neuronxcc.starfish import birpy
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.birpy.cost import engine_hz


NUM_QUEUES = 8                   # of the 16 DMA queues per engine
COL_POOL = 16                    # [P,1] columns per pool memloc (``Emitter.column``)


def pel():
    from neuronxcc import pelican
    return pelican


def choose_tile(extent, tmax):
    """Tile size for an axis: the whole extent if it fits, else a divisor of at least tmax/2 that
    needs hardly more tiles than tmax (at most 1/8 more), else tmax with a peeled remainder
    (260 on 128 partitions: 128, 128 and 4, not four tiles of 65 that leave half of them idle)."""
    if extent <= tmax:
        return max(1, extent)
    least = -(-extent // tmax)
    for d in range(tmax, tmax // 2 - 1, -1):
        if extent % d == 0 and 8 * (extent // d) <= 9 * least:
            return d
    return tmax


class Axis:
    """One axis of a loop nest: extent, tile size (1 for a plain loop)."""
    __slots__ = ("extent", "tile", "name")

    def __init__(self, extent, tile, name="i"):
        self.extent = int(extent)
        self.tile = int(tile)
        self.name = name


class Emitter:
    def __init__(self, module, target_model):
        self.m = module
        self.tm = target_model
        self.b = birpy.Builder(module)
        self._n = {}
        self.label = None            # debug name of the instruction being lowered (HLO op)
        self._q = 0
        # static work estimate per engine (ns-ish: cycles / GHz) of the kernel being emitted, for
        # simple load balancing; ``begin_kernel`` starts each kernel's count at zero
        self.engine_load = {"DVE": 0.0, "ACT": 0.0, "POOL": 0.0}
        self.dma_engine = None       # when set, the engine that triggers DMAs not given one (default SP)
        self._pq = 0
        self._colpool = None

    def ghz(self, engine):
        """ENGINE's clock in GHz on this target (``neuronxcc.hwm``), for the cycles / GHz estimates."""
        return engine_hz(engine, self.tm) / 1e9

    def begin_kernel(self):
        """A new kernel: the engine-load counts restart (earlier kernels' work does not steer it)."""
        for k in self.engine_load:
            self.engine_load[k] = 0.0
        self._colpool = None         # a column pool never spans kernels (its memloc would stay live)

    # -- names -----------------------------------------------------------------
    def fresh(self, prefix):
        prefix = prefix.replace(".", "_").replace("#", "_")
        n = self._n.get(prefix, 0)
        self._n[prefix] = n + 1
        name = "%s_%d" % (prefix, n)
        while name in self.m.tensors or name in self.m.memlocs:
            n += 1
            self._n[prefix] = n + 1
            name = "%s_%d" % (prefix, n)
        return name

    # -- storage ---------------------------------------------------------------
    def tensor(self, prefix, kind, dtype, shape, data=None, exact_name=False):
        name = prefix if exact_name else self.fresh(prefix)
        self.m.add_tensor(name, kind, dtype, shape, data)
        return name

    def sbuf(self, prefix, partitions, free, dtype):
        name = self.fresh(prefix)
        nbytes = max(4, free * bdt.itemsize(dtype))
        nbytes = (nbytes + 3) // 4 * 4
        self.m.add_memloc(name, "SBUF", partitions, nbytes)
        return name

    def column(self, prefix, partitions, dtype):
        """A [partitions, 1] column AP. Outside loops the float32 columns that compute engines write
        (not DMA loads) come from pool memlocs of COL_POOL slots, one slot each: the allocator would
        pack each small column into the address a column of another row tile just freed, and that
        false dependence serialises the tiles' statistics chains (a layernorm's mean, rstd and bias
        of tile 1 waiting on tile 0's)."""
        if self.b.depth > 1 or dtype != "float32" or prefix == "ld":
            return self.chip(self.sbuf(prefix, partitions, 1, dtype), dtype, partitions, [[1, 1]])
        pool = self._colpool
        if pool is None or pool[1] >= COL_POOL:
            pool = self._colpool = [self.sbuf("cols", self.tm.num_partitions, COL_POOL, "float32"), 0]
        pool[1] += 1
        return self.chip(pool[0], dtype, partitions, [[1, 1]], offset=pool[1] - 1)

    def psum(self, prefix, partitions, free):
        name = self.fresh(prefix)
        self.m.add_memloc(name, "PSUM", partitions, max(4, free * 4))
        return name

    # -- access patterns ---------------------------------------------------------
    def chip(self, memloc, dtype, pn, pattern, start_partition=0, offset=0):
        return birpy.AccessPattern(memloc, dtype, offset, pattern, start_partition, pn)

    def hbm(self, tensor, offset, pattern):
        t = self.m.tensors[tensor]
        return birpy.AccessPattern(tensor, t.dtype, offset, pattern)

    # -- instructions ----------------------------------------------------------
    def inst(self, opcode, engine, dsts, srcs, **attrs):
        if engine in self.engine_load and dsts:
            n = dsts[0].free_size
            self.engine_load[engine] += max(64, n) / self.ghz(engine)
        return self.b.inst(opcode, engine, dsts, srcs, name=self.label, **attrs)

    def prefetch_queue(self):
        """DMA queues of their own (the upper half of the engine's 16) for loads issued early out of
        program order (weights that depend on nothing): a queue runs its transfers in order, so on
        a rotation queue such a load would wait behind the earlier, later-starting loads there."""
        q = "q%d" % (NUM_QUEUES + self._pq % NUM_QUEUES)
        self._pq += 1
        return q

    def next_queue(self):
        """DMA queues in rotation: every queue is its own timeline track, so independent
        transfers issued by neighbouring instructions overlap (dependences are semaphores)."""
        q = "q%d" % (self._q % NUM_QUEUES)
        self._q += 1
        return q

    def dma(self, dst, src, queue=None, engine=None):
        """A DMA triggered by ENGINE (any engine's sequencer can trigger one; a store issued by the
        engine that produced its data keeps SP, which issues in order, free to run ahead with loads);
        by default ``dma_engine`` or SP."""
        engine = engine or self.dma_engine or "SP"
        if queue is None:
            queue = self.prefetch_queue() if self.dma_engine is not None else self.next_queue()
        return self.inst("dma_copy", engine, [dst], [src], queue=queue)

    # -- loop nests ----------------------------------------------------------------
    def nest(self, axes, body, starts=(), sizes=(), unroll=1):
        """Emit loops over AXES; call body(starts, sizes) in every peeled variant.

        starts: pelican Exprs (element index of the tile start on each axis),
        sizes: ints (tile extent on each axis). An axis of at most UNROLL tiles (the outermost
        only) is emitted tile by tile: a handful of row tiles whose steps (loads, vector work,
        matmuls) the scheduler may then overlap across tiles, the short remainder tile first (its
        small loads arrive first and its steps start the engines while the full tiles' loads are
        in flight); longer axes stay loops, so the instruction count is bounded by a constant
        independent of the tensor sizes."""
        P = pel()
        if not axes:
            body(list(starts), list(sizes))
            return
        ax, rest = axes[0], axes[1:]
        nfull, rem = divmod(ax.extent, ax.tile)
        if 1 < nfull and nfull + (1 if rem else 0) <= unroll:
            if rem:
                self.nest(rest, body, tuple(starts) + (P.const(nfull * ax.tile),), tuple(sizes) + (rem,))
            for k in range(nfull):
                self.nest(rest, body, tuple(starts) + (P.const(k * ax.tile),), tuple(sizes) + (ax.tile,))
            return
        elif nfull == 1:
            self.nest(rest, body, tuple(starts) + (P.const(0),), tuple(sizes) + (ax.tile,))
        elif nfull > 1:
            v = self.fresh(ax.name)
            with self.b.loop(v, 0, nfull, 1) as iv:
                self.nest(rest, body, tuple(starts) + (iv * ax.tile,), tuple(sizes) + (ax.tile,))
        if rem:
            self.nest(rest, body, tuple(starts) + (P.const(nfull * ax.tile),), tuple(sizes) + (rem,))
