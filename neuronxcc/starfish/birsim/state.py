"""Machine state of one NeuronCore for birsim: byte storage and AP resolution.

Storage is flat uint8 numpy buffers addressed as rows of bytes:
  * HBM tensor: its own buffer, one row of ``nbytes``;
  * allocated memloc: the shared SBUF (128 x sbuf_partition_bytes) or PSUM
    (128 x psum_partition_bytes) array, rows from ``memloc.start_partition``,
    bytes from ``memloc.byte_offset`` (so overlapping allocations really overlap);
  * unallocated memloc: a private ``partitions x bytes_per_partition`` buffer.

``resolve(ap, env)`` turns an access pattern into (buffer, base byte, 6 byte
strides, 6 nums) for the Cython kernels, after checking at run time that every
element is inside the target (BirSimError otherwise). Fresh on-chip memory and
output/scratch tensors are filled with 0xFF bytes (NaN / -1) unless
``poison=False``, so reads of never-written data show up.
"""
import mmap
import sys
import threading
import weakref

import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy import hbm as _hbm
from neuronxcc.starfish.birsim import _kernels as K
from neuronxcc.starfish.birsim import _rawcopy as RC
from neuronxcc.starfish.birsim._apinfo import APInfo


def check_kernel_codes(codes):
    """ImportError unless ``codes`` (the kernels' C_* enum by name) are the registry's codes."""
    want = {d.name: d.code for d in _dt.DTYPES.values()}
    if dict(codes) != want:
        raise ImportError("birsim's kernels were built with dtype codes %s, the element-type registry "
                          "(neuronxcc.common.dtypes) has %s: rebuild them" % (dict(codes), want))


check_kernel_codes(K.DTYPE_CODES)

__all__ = ["MachineState"]

NDIM = 6
_INTP = np.intp


class _BufferPool:
    """Byte buffers of machine states that are gone, kept for the next simulation so it
    does not pay the kernel's page faults for fresh memory again (for small programs
    they cost more than the simulation). Bounded; a buffer that anything still
    references (a view that outlived its state) is never handed out again."""

    LIMIT = 96 << 20          # bytes kept at most
    MIN = 256 << 10           # smaller buffers come straight from malloc

    def __init__(self):
        self.free = {}
        self.nbytes = 0
        # Re-entrant: give() runs from a weakref finalizer, which the garbage collector
        # may fire inside take() on the same thread (a plain Lock deadlocked there).
        self.lock = threading.RLock()

    def take(self, n):
        if n < self.MIN:
            return None
        with self.lock:
            lst = self.free.get(n)
            while lst:
                b = lst.pop()
                self.nbytes -= n
                if sys.getrefcount(b) <= 2:        # b here + getrefcount's argument: nobody else
                    return b
        return None

    def give(self, bufs):
        with self.lock:
            for b in bufs:
                n = b.nbytes
                lst = self.free.setdefault(n, [])
                if self.nbytes + n <= self.LIMIT and len(lst) < 2:
                    lst.append(b)
                    self.nbytes += n


_POOL = _BufferPool()


def _filled(n, fill, owned, resets):
    """n bytes of FILL (a reused buffer, or zeros from calloc when FILL is 0); RESETS gets
    (buffer, fill) so that ``MachineState.reset`` can fill it again."""
    b = _POOL.take(n)
    if b is None:
        b = np.zeros(n, np.uint8) if fill == 0 else np.full(n, fill, np.uint8)
    else:
        b.fill(fill)
    if n >= _POOL.MIN:
        owned.append(b)
    resets.append((b, fill))
    return b


def _lazy_zeros(n):
    """n zero bytes in anonymous private pages that the kernel backs only when touched.

    Not ``np.zeros``: numpy asks for transparent huge pages (madvise) on arrays of 4 MiB and up,
    and the kernel then zeroes, and on a fragmented machine first compacts, a whole 2 MiB page
    wherever a row is touched. The SBUF array is 128 rows of 192 KiB of which a small program uses
    a few KiB per row, so every one of its 2 MiB pages gets touched: 10-150 ms of the first
    simulation in a process (the compile's bir_sim check), against about 1 ms for the pages
    actually used. Private, so a forked process gets a copy-on-write view, never shared writes.
    On a host whose transparent huge pages are "always" the mapping opts out of them, for the same
    reason (where the platform has no such advice, the pages are what the host gives)."""
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        try:
            m.madvise(mmap.MADV_NOHUGEPAGE)
        except OSError:
            pass
    return np.frombuffer(m, np.uint8)


def _fresh(parts, row_bytes, fill, memlocs, owned, resets):
    """The shared SBUF/PSUM array (parts x row_bytes, flat). Only the rows and
    bytes that allocated memlocs cover can ever be addressed (every access is
    bounds-checked against its memloc), so only that box is filled; the rest of
    a fresh array stays untouched zero pages (of a reused one: unreachable bytes).
    RESETS gets the (view, fill) pairs of what was filled."""
    n = parts * row_bytes
    buf = _POOL.take(n)
    fresh_zero = buf is None
    if buf is None:
        buf = _lazy_zeros(n)
    owned.append(buf)
    grid = buf.reshape(parts, row_bytes)
    r1 = min(parts, max(x.start_partition + x.partitions for x in memlocs))
    b1 = min(row_bytes, max(x.byte_offset + x.bytes_per_partition for x in memlocs))
    if sum(x.partitions * x.bytes_per_partition for x in memlocs) < r1 * b1:
        # the memlocs' own rectangles cover less than their bounding box
        boxes = [grid[x.start_partition:x.start_partition + x.partitions,
                      x.byte_offset:x.byte_offset + x.bytes_per_partition] for x in memlocs]
    else:
        boxes = [grid[:r1, :b1]]
    for v in boxes:
        if fill or not fresh_zero:
            v[...] = fill
        resets.append((v, fill))
    return buf


class _Target:
    __slots__ = ("name", "buf", "row_bytes", "row0", "byte0", "nrows", "nbytes", "memory")

    def __init__(self, name, buf, row_bytes, row0, byte0, nrows, nbytes, memory):
        self.name = name
        self.buf = buf
        self.row_bytes = row_bytes
        self.row0 = row0
        self.byte0 = byte0
        self.nrows = nrows
        self.nbytes = nbytes
        self.memory = memory


class MachineState:
    def __init__(self, module, tm, poison=True):
        self.module = module
        self.tm = tm
        fill = 0xFF if poison else 0
        self.targets = {}
        self.shared = {}
        owned = []
        resets = []                 # (array, fill byte): what reset() fills again
        consts = []                 # (byte buffer, const bytes): what reset() copies again
        sizes = {"SBUF": tm.sbuf_partition_bytes, "PSUM": tm.psum_partition_bytes}
        for mem in ("SBUF", "PSUM"):
            used = [x for x in module.memlocs.values() if x.allocated and x.memory == mem]
            if used:
                self.shared[mem] = _fresh(tm.num_partitions, sizes[mem], fill, used, owned, resets)
        for x in module.memlocs.values():
            if x.allocated:
                self.targets[x.name] = _Target(x.name, self.shared[x.memory], sizes[x.memory], x.start_partition,
                                               x.byte_offset, x.partitions, x.bytes_per_partition, x.memory)
            else:
                buf = _filled(x.partitions * x.bytes_per_partition, fill, owned, resets)
                self.targets[x.name] = _Target(x.name, buf, x.bytes_per_partition, 0, 0, x.partitions,
                                               x.bytes_per_partition, x.memory)
        arena_n = _hbm.arena_bytes(module)
        arena = _filled(arena_n, fill, owned, resets) if arena_n else None
        for t in module.tensors.values():
            if t.arena_offset is not None:
                # scratch placed by liveness (birpy/hbm.py): one shared buffer, so tensors that
                # share bytes are one storage for the bounds checks and the access tracker
                self.targets[t.name] = _Target(t.name, arena, arena_n, 0, t.arena_offset, 1, t.nbytes, "HBM")
                continue
            buf = _filled(max(t.nbytes, 1), fill if t.kind in ("output", "scratch") else 0, owned,
                          resets if t.kind in ("output", "scratch") else [])
            if t.kind == "const":
                arr = np.ascontiguousarray(np.asarray(t.data).astype(_dt.np_dtype(t.dtype), copy=False))
                if arr.size != t.num_elements:
                    raise BirSimError("const tensor %s has %d elements, shape says %d" % (t.name, arr.size, t.num_elements))
                buf[:t.nbytes] = arr.reshape(-1).view(np.uint8)
                consts.append((buf[:t.nbytes], arr.reshape(-1).view(np.uint8)))
            self.targets[t.name] = _Target(t.name, buf, max(t.nbytes, 1), 0, 0, 1, t.nbytes, "HBM")
        self._resets = resets
        self._consts = consts
        self._cache = {}
        self._keep = []
        weakref.finalize(self, _POOL.give, owned)

    def reset(self):
        """Back to the state a fresh MachineState of the module starts in (poison or zeros where
        it filled, the const tensors' data again; inputs are set by the caller), keeping the
        buffers, so every prepared plan and access-pattern info stays valid. A loaded model
        (``birsim.model``) calls it before each execution."""
        for v, fill in self._resets:
            v.fill(fill)
        for dst, data in self._consts:
            dst[...] = data

    # -- I/O --------------------------------------------------------------
    def set_input(self, name, value):
        t = self.module.tensors[name]
        arr = np.asarray(value)
        if tuple(arr.shape) != tuple(t.shape):
            raise BirSimError("input %s has shape %s; the program expects %s" % (name, arr.shape, list(t.shape)))
        want = _dt.np_dtype(t.dtype)
        if arr.dtype.type is np.void and arr.dtype.itemsize == want.itemsize:
            arr = arr.view(want)       # bf16/fp8 arrays come back from .npz as raw void
        # (ml_dtypes' own types are kind 'V' too but convert by value: an int4 array into int8 storage)
        try:
            arr = np.ascontiguousarray(arr.astype(want, copy=False))
        except (TypeError, ValueError) as e:
            raise BirSimError("input %s of dtype %s cannot become %s: %s" % (name, arr.dtype, t.dtype, e))
        self.targets[name].buf[:t.nbytes] = arr.reshape(-1).view(np.uint8)

    def get_tensor(self, name):
        t = self.module.tensors[name]
        tgt = self.targets[name]
        buf = tgt.buf[tgt.byte0:tgt.byte0 + t.nbytes]
        arr = buf.view(_dt.np_dtype(t.dtype)).reshape(t.shape)
        if t.dtype == "bool":
            return arr != 0          # numpy bool, like an HLO pred result
        return arr.copy()

    # -- access patterns ----------------------------------------------------
    def _static(self, ap):
        r = self._cache.get(id(ap))
        if r is not None:
            return r
        return self._build(ap)

    def _build(self, ap):
        tgt = self.targets.get(ap.target)
        if tgt is None:
            raise BirSimError("access pattern names unknown target %r" % ap.target)
        d = _dt.get(ap.dtype)
        dims = [(st * d.itemsize, n) for st, n in ap.pattern]
        if tgt.memory == "HBM":
            if ap.num_partitions is not None:
                raise BirSimError("HBM access to %s must not have partitions" % ap.target)
            base = tgt.byte0            # 0, or the tensor's place in the scratch arena
            row0, row1 = 0, 1
        else:
            if ap.num_partitions is None:
                raise BirSimError("on-chip access to %s needs partitions" % ap.target)
            if ap.start_partition < 0 or ap.start_partition + ap.num_partitions > tgt.nrows:
                raise BirSimError("access to %s partitions %d..%d outside its %d partitions" % (
                    ap.target, ap.start_partition, ap.start_partition + ap.num_partitions, tgt.nrows))
            dims = [(tgt.row_bytes, ap.num_partitions)] + dims
            base = (tgt.row0 + ap.start_partition) * tgt.row_bytes + tgt.byte0
            row0 = tgt.row0 + ap.start_partition
            row1 = row0 + ap.num_partitions
        if len(dims) > NDIM:
            raise BirSimError("access to %s has %d dims; birsim handles %d" % (ap.target, len(dims), NDIM))
        shape = tuple(ap.shape)
        vstrides = tuple(int(a) for a, _ in dims)
        dims = [(0, 1)] * (NDIM - len(dims)) + dims
        e = ap.offset
        expr = coeffs = None
        const_off = 0
        if e.is_const():
            const_off = int(e)
        else:
            aff = e.affine()
            if aff is not None:
                coeffs = tuple(aff[0].items())
                const_off = int(aff[1])
            else:
                expr = e
        lo, hi = ap.element_extent()
        s = APInfo(tgt, d.name, d.code, d.itemsize, np.array([a for a, _ in dims], _INTP),
                   np.array([b for _, b in dims], _INTP), shape, d.np, vstrides, base, lo, hi, const_off, coeffs,
                   expr, row0, row1, tgt.byte0, ap.target)
        self._cache[id(ap)] = s
        self._keep.append(ap)       # keeps id(ap) unique while the state lives
        return s

    def resolve(self, ap, env):
        """-> (static info, base byte) with the run-time bounds check done."""
        s = self._static(ap)
        return s, s.base(env)

    def region(self, ap, env):
        """(storage key, row lo, row hi, byte lo, byte hi) touched by AP (half-open, physical)."""
        return self._static(ap).region(env)

    def view(self, ap, env):
        """A numpy view (AP dtype, AP shape) of the storage itself, no copy."""
        s, base = self.resolve(ap, env)
        return self._view(s, base)

    def _view(self, s, base):
        return np.ndarray(s.shape, dtype=s.npdt, buffer=s.tgt.buf, offset=base, strides=s.vstrides)

    def read_f(self, ap, env):
        """fp32 values of AP (shape ap.shape). fp32 operands come back as a
        read-only view of the storage (no copy); others are converted."""
        s, base = self.resolve(ap, env)
        return self.read_f_at(s, base)

    # The *_at forms take a resolved (APInfo, base byte) pair: the executor's cached
    # per-instruction plans call them without looking the access pattern up again.
    def read_f_at(self, s, base):
        if s.code == 0:
            if s.rview is not None:
                return s.rview
            v = self._view(s, base)
            v.flags.writeable = False
            if s.has_fixed:
                s.rview = v
            return v
        out = np.empty(s.n, np.float32)
        K.read_f32(s.tgt.buf, s.code, base, s.strides, s.nums, out)
        return out.reshape(s.shape)

    def read_i(self, ap, env):
        s, base = self.resolve(ap, env)
        return self.read_i_at(s, base)

    def read_i_at(self, s, base):
        out = np.empty(s.n, np.int64)
        K.read_i64(s.tgt.buf, s.code, base, s.strides, s.nums, out)
        return out.reshape(s.shape)

    def write_f(self, ap, env, values):
        s, base = self.resolve(ap, env)
        self.write_f_at(s, base, values)

    def write_f_at(self, s, base, values):
        if s.code == 0:
            # fp32: numpy copies into the storage view (overlap-safe)
            values = np.asarray(values)
            if values.size != s.n:
                raise BirSimError("writing %d values into %s which takes %d" % (values.size, s.target_name, s.n))
            v = s.wview
            if v is None:
                v = self._view(s, base)
                if s.has_fixed:
                    s.wview = v
            np.copyto(v, values.reshape(s.shape), casting="unsafe")
            return
        v = np.asarray(values, dtype=np.float32)
        if np.may_share_memory(v, s.tgt.buf):
            v = v.copy()
        v = np.ascontiguousarray(v).reshape(-1)
        if v.shape[0] != s.n:
            raise BirSimError("writing %d values into %s which takes %d" % (v.shape[0], s.target_name, s.n))
        K.write_f32(v, s.tgt.buf, s.code, base, s.strides, s.nums)

    def write_i(self, ap, env, values):
        s, base = self.resolve(ap, env)
        self.write_i_at(s, base, values)

    def write_i_at(self, s, base, values):
        v = np.ascontiguousarray(values, dtype=np.int64).reshape(-1)
        if v.shape[0] != s.n:
            raise BirSimError("writing %d values into %s which takes %d" % (v.shape[0], s.target_name, s.n))
        K.write_i64(v, s.tgt.buf, s.code, base, s.strides, s.nums)

    def read_raw(self, ap, env):
        s, base = self.resolve(ap, env)
        out = np.empty(s.n * s.itemsize, np.uint8)
        RC.gather_raw(s.tgt.buf, s.itemsize, base, s.strides, s.nums, out)
        return out

    def write_raw(self, ap, env, raw):
        s, base = self.resolve(ap, env)
        if raw.shape[0] != s.n * s.itemsize:
            raise BirSimError("raw copy of %d bytes into %s which takes %d" % (raw.shape[0], ap.target, s.n * s.itemsize))
        RC.scatter_raw(raw, s.tgt.buf, s.itemsize, base, s.strides, s.nums)

    def copy_raw(self, dst, src, env):
        """write_raw(dst, read_raw(src)) in one pass (same dtype; the kernel handles overlap)."""
        s, sbase = self.resolve(src, env)
        d, dbase = self.resolve(dst, env)
        if s.n != d.n or s.itemsize != d.itemsize:
            raise BirSimError("raw copy of %d bytes into %s which takes %d" % (s.n * s.itemsize, dst.target,
                                                                               d.n * d.itemsize))
        RC.copy_raw(s.tgt.buf, sbase, s.strides, s.nums, d.tgt.buf, dbase, d.strides, d.nums, s.itemsize)
