"""Emission helpers shared by ``nki.language``, ``nki.isa`` and the ``Tensor`` operators: new tiles,
operand checks, one ``emit`` that records a traced instruction (loading the sequencer registers its
operands use first), broadcasts and reshapes of views, and in-place update semantics. Assignment
(``dst[...] = value``, which may load or store) is ``movement.assign``.

Rules enforced here at trace time (with the original's error names): on-chip tiles have at most
128 partitions (err_num_partition_exceed_arch_limit), a PSUM tile at most 2 KiB per partition,
compute operands are SBUF/PSUM tiles whose first axis is the partition axis
(err_unsupported_memory / err_failed_to_infer_tile_from_local_tensor), operands agree on
partitions (err_num_partition_mismatch).
"""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace.context import TInst, current
from neuronxcc.nki._trace.view import Axis, View, whole

PMAX = 128
PSUM_BANK_BYTES = 2048
NUM_QUEUES = 8


def is_scalar(x):
    return isinstance(x, (int, float, bool, np.integer, np.floating, np.bool_))


def new_tile(shape, dtype, memory="SBUF", prefix="t", kind="tile", check=True):
    ctx = current()
    shape = tuple(int(s) for s in shape)
    if memory != "HBM" and check:
        check_tile_shape(shape, memory, dtype)
    b = ctx.new_buf(prefix, memory, shape, dtype, 0, kind)
    return whole(b, ctx.tensor_type)


def check_tile_shape(shape, memory, dtype, what="tile"):
    if not shape:
        raise E.err_insufficient_rank("Insufficient rank: an on-chip %s needs a partition dimension" % what)
    if shape[0] > PMAX:
        raise E.err_num_partition_exceed_arch_limit(
            "number of partitions %d exceed architecture limitation of %d" % (shape[0], PMAX))
    if memory == "PSUM":
        nbytes = int(np.prod(shape[1:], dtype=np.int64)) * D.itemsize(dtype)
        if nbytes > PSUM_BANK_BYTES:
            raise E.err_psum_tile_too_large(
                "PSUM tile of %d bytes per partition exceeds the architecture limitation of %d bytes (one bank)"
                % (nbytes, PSUM_BANK_BYTES))


def tile_operand(x, api, param, memories=("SBUF", "PSUM")):
    """Check X is an on-chip tile usable as a compute operand."""
    if type(x).__name__ in ("IndirectTensor", "FreeGather") and x.buf.onchip:
        raise E.err_copy_dynamic_indirect_indices_not_natively_supported(
            "copying an on-chip tensor through indirect (run-time) indices is not natively supported; use "
            "nisa.tensor_copy_dynamic_src(%s[...]) instead" % x.buf.name)
    if not isinstance(x, View):
        raise E.err_invalid_argument("parameter '%s' of '%s' must be a tile, got %r" % (param, api, type(x).__name__))
    if x.buf.memory not in memories:
        raise E.err_unsupported_memory(
            "Expected operand '%s' of '%s' to be in address space '%s', but got a tile in '%s' instead"
            % (param, api, "|".join(m.lower() for m in memories), x.buf.memory.lower()))
    if not x.is_tile():
        raise E.err_failed_to_infer_tile_from_local_tensor(
            "Failed to infer tile from tensor '%s': the first dimension of a tile must be the partition dimension"
            % x.buf.name)
    if x.shape and x.shape[0] > PMAX:
        raise E.err_num_partition_exceed_arch_limit(
            "number of partitions %d of '%s' in '%s' exceed architecture limitation of %d"
            % (x.shape[0], param, api, PMAX))
    return x


def hbm_operand(x, api, param):
    if not isinstance(x, View) or x.buf.memory != "HBM":
        mem = x.buf.memory.lower() if isinstance(x, View) else type(x).__name__
        raise E.err_unsupported_memory("Expected operand '%s' of '%s' to be in address space 'hbm', but got '%s'"
                                       % (param, api, mem))
    return x


def emit(opcode, engine, dsts, srcs, attrs=None, mask=None, links=None):
    """Record one instruction; returns the TInst."""
    from neuronxcc.nki._trace.index import Pred
    ctx = current()
    guard = None
    if mask is not None and type(mask).__name__ == "Cond":
        from neuronxcc.nki._trace.rewrite import as_guard
        guard, mask = as_guard(mask), None         # `or` / `not` of iterator comparisons: a guard formula
    if mask is not None and not isinstance(mask, Pred):
        if isinstance(mask, (bool, np.bool_)):
            if mask:
                mask = None
            else:
                return None
        else:
            raise E.err_unsupported_expression_in_mask("a mask must be a comparison of affine index expressions")
    regs = getattr(ctx, "registers", None)
    if regs:
        _load_registers(ctx, regs, engine, list(dsts) + list(srcs))
    if getattr(ctx, "guards", None):
        from neuronxcc.nki._trace.guards import active_guard_atoms
        from neuronxcc.nki._trace.index import Pred as _P
        extra = active_guard_atoms(ctx)
        if extra:
            mask = _P(extra) if mask is None else mask & _P(extra)
    for s in srcs:
        s.buf.uses += 1
        s.buf.read = True
    for d in dsts:
        d.buf.written = True
    inst = TInst(opcode, engine, dsts, srcs, attrs or {}, mask, links, E.kernel_location())
    guards = list(getattr(ctx, "cond_guards", None) or ()) + ([guard] if guard is not None else [])
    inst.gkey = tuple(id(g) for g in guards)
    if guards:
        from neuronxcc.nki._trace.rewrite import Cond
        inst.guard = guards[0] if len(guards) == 1 else Cond("and", guards)
    ctx.emit(inst)
    return inst


def _load_registers(ctx, regs, engine, operands):
    """A ``register_load`` on ENGINE of each register (``registers.as_register``) OPERANDS' offsets use."""
    seen = set()
    for op in operands:
        for v in op.off.free_vars():
            if v in regs and v not in seen:
                seen.add(v)
                view = regs[v].copy_view(axes=[])
                view.buf.read = True
                view.buf.uses += 1
                lo, hi = getattr(ctx, "register_bounds", {}).get(v, (0, (1 << 31) - 1))
                ctx.emit(TInst("register_load", engine, [], [view], {"register": v, "min": lo, "max": hi},
                               None, [], E.kernel_location()))


def same_guard(ctx, p):
    """True if instruction P was traced under exactly the guards active now (so it may be retargeted)."""
    return p.gkey == tuple(id(g) for g in (getattr(ctx, "cond_guards", None) or ()))


def next_queue():
    ctx = current()
    n = getattr(ctx, "_q", 0)
    ctx._q = n + 1
    return "q%d" % (n % NUM_QUEUES)


def dma(dst, src, mask=None, **attrs):
    dst, src = _partition_first(dst, src)
    return emit("dma_copy", "SP", [dst], [src], dict(attrs, queue=next_queue()), mask)


def _partition_axis(v):
    if not isinstance(v, View) or not v.buf.onchip:
        return None
    return next((i for i, a in enumerate(v.axes) if a.pstep and a.size > 1), None)


def _partition_first(dst, src):
    """A DMA copies element k of SRC to element k of DST, so both sides' axes may be permuted alike: an
    on-chip side whose partition axis is not its first (a whole block tensor [B, par_dim(P), F] stored
    at once) gets it moved to the front, where access patterns keep it."""
    if not (isinstance(dst, View) and isinstance(src, View)) or dst.shape != src.shape:
        return dst, src
    jd, js = _partition_axis(dst), _partition_axis(src)
    j = jd if jd is not None else js
    if not j or (jd is not None and js is not None and jd != js):
        return dst, src

    def front(v):
        return v.copy_view(axes=[v.axes[j]] + v.axes[:j] + v.axes[j + 1:])
    return front(dst), front(src)


def rank_align(x, y):
    """Tiles are partition-first: a lower-rank tile is padded with size-1 axes on the RIGHT, so a (P,)
    reduction result lines up with a (P, F) tile as (P, 1)."""
    if isinstance(x, View) and isinstance(y, View) and x.buf.onchip and y.buf.onchip:
        if len(x.shape) < len(y.shape) and x.shape[:1] == y.shape[:1]:
            x = x.copy_view(axes=list(x.axes) + [Axis(1, 0, 0) for _ in range(len(y.shape) - len(x.shape))])
        elif len(y.shape) < len(x.shape) and x.shape[:1] == y.shape[:1]:
            y = y.copy_view(axes=list(y.axes) + [Axis(1, 0, 0) for _ in range(len(x.shape) - len(y.shape))])
    return x, y


def expand(t, shape):
    """A stride-0 broadcast view of T to SHAPE (free axes only; numpy rules, right-aligned, except that an
    on-chip tile of lower rank with the same partition count is padded on the right)."""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    if t.buf.onchip and 0 < len(t.shape) < len(shape) and t.shape[0] == shape[0]:
        t = t.copy_view(axes=list(t.axes) + [Axis(1, 0, 0) for _ in range(len(shape) - len(t.shape))])
    n = len(shape)
    if len(t.shape) > n:
        raise E.err_invalid_argument("cannot broadcast %s to %s" % (t.shape, shape))
    axes = [Axis(1, 0, 0)] * (n - len(t.axes)) + list(t.axes)
    out = []
    for i, (a, s) in enumerate(zip(axes, shape)):
        if a.size == s:
            out.append(a.copy())
        elif a.size == 1:
            if i == 0 and t.buf.onchip and s > 1:
                raise E.err_num_partition_mismatch("cannot broadcast the partition dimension of %s to %s implicitly"
                                                   % (t.shape, shape))
            out.append(Axis(s, 0, 0, None))
        else:
            raise E.err_invalid_argument("cannot broadcast %s to %s" % (t.shape, shape))
    return t.copy_view(axes=out)


def partition_broadcast(t, nparts):
    """A new SBUF tile with T's single partition copied to NPARTS partitions (one DMA)."""
    out = new_tile((nparts,) + t.shape[1:], t.dtype, "SBUF", "bcast")
    src = t
    if t.buf.memory == "PSUM":
        src = copy_to_sbuf(t)
    v = src.copy_view(axes=[Axis(nparts, 0, 0, None)] + [a.copy() for a in src.axes[1:]])
    v.p0 = src.p0
    emit("dma_copy", "SP", [out], [v], {"queue": next_queue(), "partition_broadcast": True})
    return out


def copy_to_sbuf(t, dtype=None):
    out = new_tile(t.shape, dtype or t.dtype, "SBUF", "copy")
    emit("tensor_copy", "DVE", [out], [t])
    return out


def broadcast_to(t, shape):
    shape = tuple(int(s) for s in shape)
    if t.shape == shape:
        return t
    if t.buf.onchip and t.shape and t.shape[0] == 1 and shape[0] > 1:
        t = partition_broadcast(t, shape[0])
    return expand(t, shape)


def reshape(t, shape):
    """The same storage seen with SHAPE (whole tensors only; on chip the partition dim is kept)."""
    shape = tuple(int(x) for x in shape)
    if not t.is_whole():
        raise E.NkiNotImplementedError("reshape of a tensor view", "reshape the whole tensor instead")
    b = t.buf
    if size_of(shape) != size_of(t.shape):
        raise E.err_invalid_argument("cannot reshape %s to %s" % (t.shape, shape))
    if b.onchip and (not shape or shape[0] != b.shape[b.pdim]):
        raise E.err_invalid_argument("reshape must keep the partition dimension of an on-chip tensor")
    axes = []
    step = 1
    for d in range(len(shape) - 1, -1, -1):
        if b.onchip and d == 0:
            axes.append(Axis(shape[0], 1, 0))
            continue
        axes.append(Axis(shape[d], 0, step))
        step *= shape[d]
    return t.copy_view(axes=list(reversed(axes)), checks=())


def bitcast(t, dtype):
    dt = D.np_dtype(dtype)
    a, b = t.dtype.itemsize, dt.itemsize
    if a == b:
        return t.copy_view(dtype=dt)
    # an on-chip view whose innermost free axis is contiguous: the innermost size scales by the size ratio
    # (a [P, 1] fp32 tile viewed as [P, 4] bytes), element steps and the offset likewise
    last = t.axes[-1] if len(t.axes) > 1 else None
    off = t.off
    if not t.buf.onchip or last is None or (last.fstep != 1 and last.size != 1) or not off.is_const():
        raise E.NkiNotImplementedError("tensor.view to a dtype of another size",
                                       "only an on-chip view whose last free axis is contiguous")
    if a > b:
        r = a // b
        axes = [x.copy(fstep=x.fstep * r) for x in t.axes[:-1]] + [last.copy(size=last.size * r, fstep=1)]
        return t.copy_view(dtype=dt, axes=axes, off=_pel.const(int(off) * r), checks=())
    r = b // a
    if last.size % r or int(off) % r or any(x.fstep % r for x in t.axes[:-1]):
        raise E.err_invalid_argument("tensor.view(%s): the last axis (%d elements at offset %d) does not hold "
                                     "whole %s elements" % (dt, last.size, int(off), dt))
    axes = [x.copy(fstep=x.fstep // r) for x in t.axes[:-1]] + [last.copy(size=last.size // r, fstep=1)]
    return t.copy_view(dtype=dt, axes=axes, off=_pel.const(int(off) // r), checks=())


# -- assignment into a fresh result's producer, in-place update ------------------------------------
def retarget(dst, value):
    """Make VALUE's producer write DST directly when VALUE is a fresh, unused whole tile (True if done)."""
    ctx = current()
    b = value.buf
    p = b.producer
    if p is None or b.uses or ctx.last is not p or not value.is_whole() or value.dtype != dst.dtype:
        return False
    if not same_guard(ctx, p):
        return False
    if b.kind != "tile" or tuple(value.shape) != tuple(dst.shape):
        return False
    if p.dsts[0].buf is not b:
        return False
    from neuronxcc.starfish.birpy.opcodes import ENGINE_WRITES, OPCODES
    role = OPCODES[p.opcode].dsts[0]
    mem = dst.buf.memory
    if mem not in role.memories or (OPCODES[p.opcode].kind == "compute" and mem not in ENGINE_WRITES[p.engine]):
        return False
    p.dsts[0] = dst
    dst.buf.written = True
    ctx.bufs.pop(b.name, None)
    return True


def size_of(shape):
    """The number of elements of SHAPE."""
    n = 1
    for s in shape:
        n *= s
    return n


def update_inplace(view, other, op):
    """view op= other (``acc += nc_matmul(...)`` accumulates in PSUM)."""
    ctx = current()
    if view.buf.memory == "HBM":
        raise E.err_unsupported_memory("in-place update of an HBM tensor is not supported; load, update, store")
    if isinstance(other, View) and op == "add" and view.buf.memory == "PSUM":
        b = other.buf
        p = b.producer
        if p is not None and p.opcode == "matmul" and not b.uses and ctx.last is p and other.is_whole() \
                and same_guard(ctx, p) \
                and view.dtype == np.dtype(np.float32) and tuple(view.shape) == tuple(other.shape):
            p.dsts[0] = view
            p.attrs["psum_zero"] = False
            if not view.buf.written and view.buf.origin is not None:
                # the first accumulation into a PSUM tensor nothing wrote (nl.ndarray) starts from zero,
                # as the accumulation group's first matmul overwrites on the device: zero it where created
                acc = view.buf
                flat = view.like(acc, acc.dtype, 0, 0, [Axis(acc.partitions, 1, 0), Axis(acc.free_elems, 0, 1)])
                ctx.emit_at_origin(acc, TInst("memset", "DVE", [flat], [], {"value": 0.0}, None, None, p.loc))
            view.buf.written = True
            view.buf.read = True
            ctx.bufs.pop(b.name, None)
            return
    tile_operand(view, "+=", "dst")
    if is_scalar(other):
        emit("tensor_scalar", "DVE", [view], [view], {"op0": op, "operand0": float(other)})
        return
    tile_operand(other, "+=", "src")
    if other.shape != view.shape:
        other = broadcast_to(other, view.shape)
    emit("tensor_tensor", "DVE", [view], [view, other], {"op": op})


def mark_producer(t, inst):
    if inst is not None:
        t.buf.producer = inst
    return t
