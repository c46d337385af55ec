"""Evaluate a fused elementwise expression on one on-chip tile.

``TileEval(em, space)`` is created per tile of a kernel's loop nest. The
iteration ``space`` says which axis of the expression's index space lies on
the partitions (``p``), which on the free dim (``f``) and where the current
tile starts on every axis. ``value(x)`` returns a ``TV`` (tile value): an
on-chip [pn, fn] access pattern, or a splat scalar that later ops fold into
``tensor_scalar`` immediates.

Engine mapping (one table, ``UNARY_ACT`` / ``ALU_BINARY``; the functions without one engine
instruction, sin, atan2, popcount, rounding ..., are built in ``tilemath.TileMath``): transcendental
functions go to ACT ``activation``; a chain that is one ScalarE function of a
value (gelu, silu, softplus, sigmoid ... as jax writes them; ``actmatch``) is
one ``activation``; arithmetic, comparisons and logic go to
DVE (floats) or POOL (integers, exact int math); casts are ``tensor_copy``.
Float work is balanced by the kernel's static per-engine load estimate
(``Emitter.engine_load``): x+c, x*c, x*x, tile*col and tile+col go to ACT
(identity/square with immediate or per-partition scale/bias), fp32 SBUF
tile-op-tile to POOL, whichever has less queued than DVE.
Views leaves are DMA'd from HBM with their strides as the access pattern
(broadcast = stride 0), iota leaves come from the POOL ``iota`` instruction
or, inside loops, from the ``arange`` constant table.
"""
import math

import numpy as np

from neuronxcc.common import dtypes as _dtypes
from neuronxcc.errors import LoweringError, cannot_lower as _cannot_lower  # noqa: F401 (LoweringError re-exported)
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.mmleaf import MM_PREFIX, materialised_view
from neuronxcc.starfish.penguin.tilemath import TileMath
from neuronxcc.starfish.penguin.views import Splat, View

IOTA_BASE = "__iota__"

UNARY_ACT = {"exponential": "exp", "log": "log", "tanh": "tanh", "logistic": "sigmoid", "sqrt": "sqrt",
             "rsqrt": "rsqrt", "erf": "erf", "sign": "sign", "abs": "abs"}
ALU_BINARY = {"add": "add", "subtract": "subtract", "multiply": "mult", "divide": "divide",
              "maximum": "max", "minimum": "min", "power": "pow", "remainder": "mod"}
# float ops whose fp32 result --auto-cast all computes in the narrow type (math, not data movement,
# comparisons or index arithmetic)
CAST_ALL_OPS = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "negate", "abs",
                "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt", "rsqrt",
                "erf", "sine", "cosine", "tan", "atan2", "cbrt"}
# the narrow float types whose elementwise results --auto-cast fp32 computes in fp32
UPCAST_FROM = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
CMP = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}
SWAP_CMP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
REDUCE_ALU = {"add": "add", "max": "max", "min": "min", "mul": "mult"}   # HLO reducer -> ALU op
LOGIC_BOOL = {"and": "logical_and", "or": "logical_or", "xor": "logical_xor"}
LOGIC_INT = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
             "shift-left": "logical_shift_left", "shift-right-logical": "logical_shift_right",
             "shift-right-arithmetic": "arith_shift_right"}


def cannot_lower(op, why):
    """The LoweringError for Penguin op ``op`` (NCC_EPEN001): ``errors.cannot_lower`` at the op."""
    return _cannot_lower(op.kind, op.where(), why)


def unsupported_node(node, why):
    """The LoweringError for expression node ``node`` (NCC_EPEN001), at its op when it has one."""
    return _cannot_lower(node.op, ir.where(node.loc) if node.loc else "", why)


def onchip_dtype(dtype):
    """The dtype a value is held in on chip (64-bit types narrow to 32)."""
    return _dtypes.onchip_as(dtype)


class TV:
    """A tile value: on-chip AP (kind 'tile') or a scalar (kind 'splat')."""
    __slots__ = ("kind", "ap", "value", "dtype")

    def __init__(self, kind, dtype, ap=None, value=None):
        self.kind = kind
        self.dtype = dtype
        self.ap = ap
        self.value = value

    @property
    def is_splat(self):
        return self.kind == "splat"


class Space:
    """Tile position: for each axis of the index space its start Expr and size."""

    def __init__(self, p_axis, f_axis, starts, sizes):
        self.p = p_axis
        self.f = f_axis
        self.starts = starts
        self.sizes = sizes
        self.pn = sizes[p_axis] if p_axis is not None else 1
        self.fn = sizes[f_axis] if f_axis is not None else 1


class TileEval(TileMath):
    def __init__(self, cg, space):
        self.cg = cg
        self.em = cg.em
        self.s = space
        self.memo = {}
        self.keys = {}
        self._alive = []
        self.nloads = 0
        self.hoisted = {}     # loop-invariant tiles made before the loop (see hoist): key -> AP
        self.mm = None        # mmfuse.TileScope when the kernel evaluates matmuls inline
        # a narrow float tile converted to fp32 is used as it is (engines read it and compute in
        # fp32, so the widening is exact); only for kernels whose every consumer of a value is an
        # engine instruction (not a DMA of the value itself)
        self.widen_in_place = False

    # -- storage -----------------------------------------------------------------
    def new_tile(self, dtype, prefix="t"):
        dtype = onchip_dtype(dtype)
        m = self.em.sbuf(prefix, self.s.pn, self.s.fn, dtype)
        return TV("tile", dtype, ap=self.em.chip(m, dtype, self.s.pn, [[1, self.s.fn]]))

    def row_reduce(self, v):
        """A last-axis reduction computed inside this tile: a [P, 1] column value."""
        from neuronxcc.starfish.penguin import rows
        info = self.cg.rowred[v.base]
        xin = rows.reindexed_input(self.cg, v, self.s.f)
        sq = _square_of(xin) if info.red == "add" else None
        if sq is not None and self.key(xin) not in self.memo:
            # sum of squares (a variance): ACT squares the tile and accumulates the row sum at once;
            # of y - c (c a [P,1] column: x - mean) it takes -c as its bias (y - c is not computed)
            cen = self._centred(sq)
            t = self.new_tile("float32")
            col = self.new_col("float32", "rowred")
            if cen is not None:
                y, nc = cen
                self.em.inst("activation", "ACT", [t.ap, col.ap], [y.ap, nc.ap], func="square", scale=1.0,
                             bias_ap=True, reduce="add")
            else:
                y = self.materialise(self.value(sq))
                self.em.inst("activation", "ACT", [t.ap, col.ap], [y.ap], func="square", scale=1.0, bias=0.0,
                             reduce="add")
            self.memo[self.key(xin)] = t
        else:
            t = self.materialise(self.value(xin))
            if t.dtype != "float32":
                t = self.cast(t, "float32")
            col = self.new_col("float32", "rowred")
            body = self.em.b.body
            last = body[-1] if body else None
            if info.red == "add" and last is not None and last.kind == "inst" and last.opcode == "activation" \
                    and not last.attrs.get("reduce") and len(last.dsts) == 1 and last.dsts[0] is t.ap:
                # the tile was just written by one ACT instruction (a softmax's exp): its accumulator
                # gives the row sum in the same pass
                last.attrs["reduce"] = "add"
                last.dsts.append(col.ap)
            elif info.red == "add" and self.s.p is not None and self.mm is not None and self._act_has_room():
                # a row sum on ACT (identity with its accumulator; the copy it writes is not read) when
                # DVE has more queued: a fused kernel's layernorm mean next to its residual add on DVE
                junk = self.new_tile("float32")
                self.em.inst("activation", "ACT", [junk.ap, col.ap], [t.ap], func="identity", scale=1.0, bias=0.0,
                             reduce="add")
            else:
                self.em.inst("tensor_reduce", "DVE", [col.ap], [t.ap], op=REDUCE_ALU[info.red], axes=1)
        ident = {"add": 0.0, "max": float("-inf"), "min": float("inf")}[info.red]
        if info.init != ident:
            col = self.binary(REDUCE_ALU[info.red], col, TV("splat", "float32", value=info.init), "float32")
        if onchip_dtype(info.dtype) != "float32":
            col = self.cast(col, info.dtype)
        return col

    def _centred(self, x):
        """(tile y, column -c) for x = y - c with c a [P,1] column and y an fp32 tile; else None."""
        if not (isinstance(x, Node) and x.op == "subtract" and x.dtype == "float32" and self.s.p is not None):
            return None
        y = self.value(x.args[0])
        if y.kind != "tile" or y.dtype != "float32":
            return None
        nc = self._negated_col(x.args[1])
        return None if nc is None else (y, nc)

    def _negated_col(self, c):
        """-c as a [P,1] column (c an fp32 column expression), once per tile: of c = s / n or s * k (a
        mean) straight from s, s * (-1 / n) or s * -k, so c itself need not be computed."""
        k = ("neg", self.key(c))
        if k in self.memo:
            return self.memo[k]
        src, f = None, -1.0
        if isinstance(c, Node) and c.op in ("divide", "multiply") and c.dtype == "float32" and len(c.args) == 2 \
                and self.key(c) not in self.memo:
            a, v = c.args if isinstance(c.args[1], Splat) else (c.args[::-1] if c.op == "multiply" else (None, None))
            try:
                v = float(v.value) if isinstance(v, Splat) else 0.0
            except (TypeError, ValueError):
                v = 0.0
            if v != 0.0 and math.isfinite(v):
                a = self.value(a)
                if a.kind == "col" and a.dtype == "float32":
                    src, f = a, (-1.0 / v if c.op == "divide" else -v)
        if src is None:
            src = self.value(c)
            if src.kind != "col" or src.dtype != "float32":
                return None
        out = self.new_col("float32", "negc")
        self.em.inst("tensor_scalar", "DVE", [out.ap], [src.ap], op0="mult", operand0=f)
        self.memo[k] = out
        return out

    def _centred_scaled(self, x):
        """(y - c1) * c2 (a layernorm's normalisation: c1 the mean, c2 the rstd) as one ACT instruction,
        y * c2 + (-c1) * c2, with the bias column from one DVE op on [P,1]; else None."""
        if not (isinstance(x, Node) and x.op == "multiply" and len(x.args) == 2) or self.key(x.args[0]) in self.memo:
            return None                      # (y - c1) already computed: multiply it
        cen = self._centred(x.args[0])
        if cen is None:
            return None
        c2 = self.value(x.args[1])
        if c2.kind != "col" or c2.dtype != "float32":
            return None
        y, nc1 = cen
        nb = self.new_col("float32", "negcs")
        self.em.inst("tensor_scalar", "DVE", [nb.ap], [nc1.ap, c2.ap], op0="mult", operand0_ap=True)
        out = self.new_tile("float32")
        self.em.inst("activation", "ACT", [out.ap], [y.ap, nb.ap, c2.ap], func="identity", bias_ap=True,
                     scale_ap=True)
        return out

    def new_col(self, dtype, prefix="col"):
        dtype = onchip_dtype(dtype)
        return TV("col", dtype, ap=self.em.column(prefix, self.s.pn, dtype))

    def materialise(self, tv, dtype=None):
        """A splat (memset) or a [P,1] column (broadcast along the free axis) as a real tile."""
        if tv.kind == "col":
            dt = onchip_dtype(dtype or tv.dtype)
            z = self.materialise(TV("splat", dt, value=0))
            out = self.new_tile(dt, "colx")
            # integers on POOL (exact integer ALU); DVE arithmetic goes through fp32
            eng = "POOL" if bdt.is_int(dt) and bdt.is_int(tv.dtype) else "DVE"
            self.em.inst("tensor_scalar", eng, [out.ap], [z.ap, tv.ap], op0="add", operand0_ap=True)
            return out
        if not tv.is_splat:
            return tv
        dtype = onchip_dtype(dtype or tv.dtype)
        h = self.hoisted.get(("splat", dtype, _py(tv.value, dtype)))
        if h is not None:
            return TV("tile", dtype, ap=self.em.chip(h.target, dtype, self.s.pn, [[1, self.s.fn]]))
        out = self.new_tile(dtype, "splat")
        eng = "POOL" if bdt.is_int(dtype) else "DVE"
        self.em.inst("memset", eng, [out.ap], [], value=_py(tv.value, dtype))
        return out

    # -- leaves ------------------------------------------------------------------------
    def leaf_offset(self, v):
        e = v.offset if not isinstance(v.offset, int) else self.cg.P.const(v.offset)
        for k, st in enumerate(v.strides):
            if st:
                e = e + self.s.starts[k] * st
        return e

    def leaf_pattern(self, v):
        sp = v.strides[self.s.p] if self.s.p is not None else 0
        sf = v.strides[self.s.f] if self.s.f is not None else 0
        return [[sp, self.s.pn], [sf, self.s.fn]]

    def load(self, v):
        if v.base == IOTA_BASE:
            return self.load_iota(v)
        t = self.em.m.tensors[v.base]
        pat = self.leaf_pattern(v)
        if self._col_load(pat, True) and v.dtype == t.dtype:
            # broadcast along the free axis: one element per partition, a [P,1] column (a stride-0
            # DMA pattern would move one element per descriptor)
            out = self.new_col(t.dtype, "ld")
            self.em.dma(out.ap, self.em.hbm(v.base, self.leaf_offset(v), [pat[0], [1, 1]]))
            self.nloads += 1
            return out
        out = self.new_tile(v.dtype if v.dtype == t.dtype else t.dtype, "ld")
        src = self.em.hbm(v.base, self.leaf_offset(v), pat)
        # independent loads of one tile go to different DMA queues (Emitter.dma rotates them)
        self.em.dma(out.ap, src)
        self.nloads += 1
        if v.dtype != t.dtype:           # bitcast views keep the base dtype
            out.dtype = t.dtype
        return out

    def load_iota(self, v):
        off = self.leaf_offset(v)
        pat = self.leaf_pattern(v)
        if off.is_const():
            out = self.new_tile("int32", "iota")
            self.em.inst("iota", "POOL", [out.ap], [], pattern=[pat[1]], offset=int(off),
                         channel_multiplier=pat[0][0])
        elif self._col_load(pat):
            base = self.cg.arange_table(v)
            out = self.new_col("int32", "iota")
            self.em.dma(out.ap, self.em.hbm(base, off, [pat[0], [1, 1]]))
        else:
            # the static grid from POOL's iota plus the loop-dependent offset as a [P,1] column (one
            # element of the arange table, the same on every partition), instead of a DMA of the grid
            base = self.cg.arange_table(v)
            h = self.hoisted.get(("iota", pat[1][0], pat[0][0]))
            if h is not None:
                grid = TV("tile", "int32", ap=self.em.chip(h.target, "int32", self.s.pn, [[1, self.s.fn]]))
            else:
                grid = self.new_tile("int32", "iota")
                self.em.inst("iota", "POOL", [grid.ap], [], pattern=[pat[1]], offset=0,
                             channel_multiplier=pat[0][0])
            dyn = self.new_col("int32", "iota_off")
            self.em.dma(dyn.ap, self.em.hbm(base, off, [[0, self.s.pn], [1, 1]]))
            out = self.new_tile("int32", "iota")
            self.em.inst("tensor_scalar", "POOL", [out.ap], [grid.ap, dyn.ap], op0="add", operand0_ap=True)
        if v.dtype != "int32":
            return self.cast(out, v.dtype)
        return out

    def hoist(self, expr):
        """Emit here (before the loop whose tiles will evaluate expr) the loop-invariant tiles expr
        needs: the constant operands of its selects (memsets) and the static grids of its iota
        leaves; returns the dict to set as ``hoisted`` of those tiles' TileEvals (of this tile's
        partitions and at most this tile's free size)."""
        out, seen, todo = {}, set(), [expr]
        while todo:
            x = todo.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Node):
                todo.extend(x.args)
                if x.op == "select":
                    dt = onchip_dtype(x.dtype)
                    for a in x.args[1:]:
                        if isinstance(a, Splat) and ("splat", dt, _py(a.value, dt)) not in out:
                            t = self.materialise(TV("splat", dt, value=a.value))
                            out[("splat", dt, _py(a.value, dt))] = t.ap
            elif isinstance(x, View) and x.base == IOTA_BASE:
                pat = self.leaf_pattern(x)
                key = ("iota", pat[1][0], pat[0][0])
                if key not in out and not self._col_load(pat):
                    grid = self.new_tile("int32", "hiota")
                    self.em.inst("iota", "POOL", [grid.ap], [], pattern=[pat[1]], offset=0,
                                 channel_multiplier=pat[0][0])
                    out[key] = grid.ap
        return out

    def _col_load(self, pat, scalar_ok=False):
        """A tile pattern that repeats one element along the free axis (stride 0) on several partitions;
        with scalar_ok also the same element on all of them (a broadcast scalar: P descriptors instead
        of P x F)."""
        return pat[1][0] == 0 and pat[1][1] > 1 and pat[0][1] > 1 and (pat[0][0] != 0 or scalar_ok)

    # -- evaluation ------------------------------------------------------------------
    def key(self, x):
        """Structural key of an expression: equal keys compute equal tiles (CSE within a tile)."""
        i = id(x)
        k = self.keys.get(i)
        if k is None:
            if isinstance(x, Splat):
                k = ("s", repr(x.value), x.dtype)
            elif isinstance(x, View):
                k = ("v", x.base, x.dtype, x.shape, x.strides, str(x.offset))
            else:
                k = ("n", x.op, repr(sorted(x.attrs.items())), x.dtype, x.shape,
                     tuple(self.key(a) for a in x.args))
            self.keys[i] = k
            self._alive.append(x)        # ids stay valid while the key is cached
        return k

    def value(self, x):
        if id(x) in self.memo:
            return self.memo[id(x)]
        k = self.key(x)
        if k in self.memo:
            self.memo[id(x)] = self.memo[k]
            return self.memo[k]
        if isinstance(x, Splat):
            r = TV("splat", x.dtype, value=x.value)
        elif isinstance(x, View) and x.base.startswith("__row__"):
            r = self.row_reduce(x)
        elif isinstance(x, View) and x.base.startswith(MM_PREFIX):
            # a lazy matmul leaf: its row tile's value under the kernel's TileScope (penguin/mmfuse.py)
            r = self.mm.tile_value(self, x) if self.mm is not None else self.load(materialised_view(self.cg, x))
        elif isinstance(x, View):
            r = self.mm.ctx.shared_load(self, x) if self.mm is not None else None
            if r is None:
                r = self.load(x)
        else:
            m = self.cg.act_matcher.match(x)
            if m is not None:          # a chain the activation engine computes in one instruction
                dt = onchip_dtype(x.dtype)
                if self.cg.cast.all and dt == "float32":
                    dt = self.cg.cast.dtype
                    if id(x) not in self.cg.cast_seen:
                        self.cg.cast_seen[id(x)] = x
                        self.cg.cast.count("elementwise")
                r = self.act(m[0], self.value(m[1]), dt)
            else:
                aff = _act_affine(x)
                r = None if aff is not None else self._centred_scaled(x)
                if aff is not None:
                    # f(z * scale + bias): one ACT instruction (rsqrt(var / n + eps) of a layernorm)
                    func, z, scale, bias = aff
                    r = self.act(func, self.value(z), onchip_dtype(x.dtype), scale=scale, bias=bias)
                elif r is None:
                    args = [self.value(a) for a in x.args]
                    r = self.op(x, args)
        self.memo[k] = r
        self.memo[id(x)] = r
        return r

    def cast(self, a, dtype):
        dtype = onchip_dtype(dtype)
        if a.is_splat:
            return TV("splat", dtype, value=_convert_scalar(a.value, dtype))
        if a.dtype == dtype:
            return a
        if a.kind == "col":
            out = self.new_col(dtype, "cvt")
            self.em.inst("tensor_copy", "DVE", [out.ap], [a.ap])
            return out
        out = self.new_tile(dtype, "cvt")
        if dtype == "bool":
            eng = "POOL" if bdt.is_int(a.dtype) else "DVE"
            self.em.inst("tensor_scalar", eng, [out.ap], [a.ap], op0="ne", operand0=0)
        else:
            eng = "POOL" if bdt.is_int(dtype) and bdt.is_int(a.dtype) else "DVE"
            self.em.inst("tensor_copy", eng, [out.ap], [a.ap])
        return out

    def engine_for(self, *tvs):
        return "POOL" if all(bdt.is_int(t.dtype) for t in tvs) else "DVE"

    def binary(self, alu, a, b, out_dtype, swap=None):
        if a.kind == "col" or b.kind == "col":
            return self.binary_col(alu, a, b, out_dtype)
        if a.is_splat and b.is_splat:
            a = self.materialise(a)
        pa, pb = getattr(a, "psum", None), getattr(b, "psum", None)
        if (pa is None) != (pb is None) and not (a.is_splat or b.is_splat) \
                and onchip_dtype(out_dtype) == "float32" and alu in ("add", "subtract", "mult"):
            # a fused matmul's row tile still in PSUM (mmtile._LazyTV) with an SBUF tile: DVE reads it
            # there, and its eviction is not emitted unless something else needs it in SBUF
            out = self.new_tile(out_dtype)
            self.em.inst("tensor_tensor", "DVE", [out.ap], [pa if pa is not None else a.ap,
                                                            pb if pb is not None else b.ap], op=alu)
            return out
        eng = self.engine_for(a, b)
        if eng == "DVE" and not bdt.is_int(onchip_dtype(out_dtype)):
            act = self._on_act(alu, a, b)
            if act is not None:
                return act(out_dtype)
            if alu == "mult" and a is b and not a.is_splat and self._act_has_room():
                return self.act("square", a, out_dtype)        # x*x: ACT square (fp32), off the DVE
        out = self.new_tile(out_dtype)
        if b.is_splat:
            self.em.inst("tensor_scalar", eng, [out.ap], [a.ap], op0=alu, operand0=_py(b.value, a.dtype))
        elif a.is_splat:
            if swap:
                self.em.inst("tensor_scalar", eng, [out.ap], [b.ap], op0=swap, operand0=_py(a.value, b.dtype))
            else:
                self.em.inst("tensor_scalar", eng, [out.ap], [b.ap], op0=alu, operand0=_py(a.value, b.dtype),
                             reverse0=True)
        else:
            if eng == "DVE" and self._pool_has_room(a, b, out):
                eng = "POOL"        # fp32 tile op tile: 2N DVE cycles, 150 + N on POOL; balance the two
            self.em.inst("tensor_tensor", eng, [out.ap], [a.ap, b.ap], op=alu)
        return out

    def _pool_has_room(self, *tvs):
        """True for fp32 SBUF tiles when POOL has less work queued in this kernel than DVE."""
        m = self.em.m
        if any(t.dtype != "float32" or t.ap is None or m.memlocs[t.ap.target].memory != "SBUF" for t in tvs):
            return False
        n = self.s.fn
        load = self.em.engine_load
        return load["POOL"] + (150 + n) / self.em.ghz("POOL") < load["DVE"] + (60 + 2 * max(32, n)) / self.em.ghz("DVE")

    def _on_act(self, alu, a, b):
        """Balance DVE and ACT: x+c, x-c, c-x and x*c are ACT identity activations (in*scale + bias,
        fp32) when ACT has less work queued in this kernel than DVE. Returns an emitter or None."""
        if (a.is_splat == b.is_splat) or alu not in ("add", "subtract", "mult"):
            return None
        t, c = (a, b) if b.is_splat else (b, a)
        if bdt.is_int(t.dtype):
            return None
        try:
            c = float(c.value)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(c):
            return None
        if not self._act_has_room():
            return None
        if alu == "mult":
            scale, bias = c, 0.0
        elif alu == "add":
            scale, bias = 1.0, c
        elif b.is_splat:                 # x - c
            scale, bias = 1.0, -c
        else:                            # c - x
            scale, bias = -1.0, c

        def emit(out_dtype):
            return self.act("identity", t, out_dtype, scale=scale, bias=bias)
        return emit

    def _act_has_room(self):
        """True when ACT has less work queued in this kernel than DVE (static estimate)."""
        n = self.s.fn
        load = self.em.engine_load
        return load["ACT"] + max(64, n) / self.em.ghz("ACT") < load["DVE"] + max(64, n) / self.em.ghz("DVE")

    def binary_col(self, alu, a, b, out_dtype):
        """Ops with a [P,1] column operand: column op column/scalar stays a column; a tile op column
        is a tensor_scalar with the column as the per-partition operand."""
        # integer operands on POOL (exact integer ALU); DVE compares and arithmetic go through fp32
        ints = bdt.is_int(a.dtype) and bdt.is_int(b.dtype)
        if bdt.is_int(onchip_dtype(out_dtype)) and not ints and alu not in ("eq", "ne", "lt", "le", "gt", "ge"):
            return self.binary(alu, self.materialise(a), self.materialise(b), out_dtype)
        eng, sdt = ("POOL", a.dtype) if ints else ("DVE", "float32")
        if a.kind == "col" and b.kind in ("col", "splat"):
            out = self.new_col(out_dtype)
            if b.kind == "col":
                self.em.inst("tensor_tensor", eng, [out.ap], [a.ap, b.ap], op=alu)
            else:
                self.em.inst("tensor_scalar", eng, [out.ap], [a.ap], op0=alu, operand0=_py(b.value, sdt))
            return out
        if a.kind == "splat":             # splat op col
            out = self.new_col(out_dtype)
            self.em.inst("tensor_scalar", eng, [out.ap], [b.ap], op0=alu, operand0=_py(a.value, sdt),
                         reverse0=True)
            return out
        tile, col = (a, b) if b.kind == "col" else (b, a)
        if alu in ("mult", "add") and not bdt.is_int(tile.dtype) and tile.kind != "splat" \
                and self._act_has_room():
            # tile * col / tile + col: ACT identity with the column as per-partition scale / bias
            tile = self.materialise(tile)
            out = self.new_tile(out_dtype)
            if alu == "mult":
                self.em.inst("activation", "ACT", [out.ap], [tile.ap, col.ap], func="identity", scale_ap=True)
            else:
                self.em.inst("activation", "ACT", [out.ap], [tile.ap, col.ap], func="identity", bias_ap=True)
            return out
        out = self.new_tile(out_dtype)
        eng = "POOL" if ints and tile.kind != "splat" else "DVE"
        if b.kind == "col":               # tile op col
            self.em.inst("tensor_scalar", eng, [out.ap], [a.ap, b.ap], op0=alu, operand0_ap=True)
        else:                             # col op tile
            self.em.inst("tensor_scalar", eng, [out.ap], [b.ap, a.ap], op0=alu, operand0_ap=True, reverse0=True)
        return out

    def act(self, func, a, out_dtype, scale=1.0, bias=0.0):
        if a.kind == "col":
            out = self.new_col(out_dtype)
            self.em.inst("activation", "ACT", [out.ap], [a.ap], func=func, scale=float(scale), bias=float(bias))
            return out
        a = self.materialise(a)
        out = self.new_tile(out_dtype)
        self.em.inst("activation", "ACT", [out.ap], [a.ap], func=func, scale=float(scale), bias=float(bias))
        return out

    def op(self, x, args):
        op = x.op
        dt = onchip_dtype(x.dtype)
        cast = self.cg.cast
        if (cast.all and dt == "float32" or cast.upcast and dt in UPCAST_FROM) and op in CAST_ALL_OPS:
            dt = cast.dtype                # --auto-cast all: the result tile is the narrow type (fp32: fp32)
            if id(x) not in self.cg.cast_seen:
                self.cg.cast_seen[id(x)] = x
                cast.count("elementwise")
        if op == "copy":
            return args[0]
        if op == "convert":
            a = args[0]
            if (self.widen_in_place and dt == "float32" and a.kind == "tile" and a.dtype in ("bfloat16", "float16")
                    and a.ap.dtype == a.dtype):
                return TV("tile", dt, ap=a.ap)
            return self.cast(a, dt)
        if op == "bitcast-convert":
            a = self.materialise(args[0])
            if a.kind == "tile" and a.ap.dtype != a.dtype:      # a narrow tile used as wide: widen its bytes
                a = self.cast(TV("tile", a.ap.dtype, ap=a.ap), a.dtype)
            if bdt.itemsize(a.dtype) != bdt.itemsize(dt):
                raise unsupported_node(x, "bitcast between types of different widths")
            return TV("tile", dt, ap=a.ap.copy(dtype=dt))
        if all(a.is_splat for a in args) and args:
            return self.fold(x, args)
        if op in ALU_BINARY:
            if bdt.is_int(dt) and op in ("divide", "remainder"):
                return self.int_divmod(x, args[0], args[1])
            if op == "remainder":
                return self.fmod(args[0], args[1], dt)
            a, b = args
            return self.binary(ALU_BINARY[op], a, b, dt,
                               swap=ALU_BINARY[op] if op in ("add", "multiply", "maximum", "minimum") else None)
        if op == "compare":
            c = CMP[x.attrs["direction"]]
            a, b = args
            return self.binary(c, a, b, "bool", swap=SWAP_CMP[c])
        if op in ("and", "or", "xor"):
            table = LOGIC_BOOL if dt == "bool" else LOGIC_INT
            return self.binary(table[op], args[0], args[1], dt, swap=table[op])
        if op.startswith("shift"):
            return self.binary(LOGIC_INT[op], args[0], args[1], dt)
        if op == "not":
            if dt == "bool":
                return self.binary("eq", args[0], TV("splat", "bool", value=0), "bool")
            return self.binary("bitwise_xor", args[0], TV("splat", dt, value=-1), dt)
        if op == "negate":
            return self.binary("mult", args[0], TV("splat", dt, value=-1), dt)
        if op == "abs" and bdt.is_int(dt):
            neg = self.binary("mult", args[0], TV("splat", dt, value=-1), dt)
            return self.binary("max", args[0], neg, dt)
        if op in UNARY_ACT:
            return self.act(UNARY_ACT[op], args[0], dt)
        if op == "log-plus-one":
            return self.act("log", args[0], dt, bias=1.0)
        if op == "exponential-minus-one":
            e = self.act("exp", args[0], "float32")
            return self.binary("subtract", e, TV("splat", "float32", value=1.0), dt)
        if op == "sine":
            return self.sine(args[0], dt, 0.0)
        if op == "cosine":
            return self.sine(args[0], dt, math.pi / 2)
        if op == "atan2":
            return self.atan2(args[0], args[1], dt)
        if op == "tan":
            return self.tan(args[0], dt)
        if op == "cbrt":
            return self.cbrt(args[0], dt)
        if op == "popcnt":
            return self.popcnt(args[0], dt)
        if op == "count-leading-zeros":
            return self.clz(args[0], dt)
        if op in ("floor", "ceil", "round-nearest-even", "round-nearest-afz"):
            return self.rounding(op, args[0], dt)
        if op == "is-finite":
            a = self.materialise(args[0])
            out = self.new_tile("bool")
            self.em.inst("tensor_scalar", "DVE", [out.ap], [a.ap], op0="mult", operand0=0.0, op1="eq",
                         operand1=0.0)
            return out
        if op == "select":
            p, t, f = args
            if dt == "bool" and t.is_splat and f.is_splat and bool(t.value) != bool(f.value) and not p.is_splat:
                # select(p, true, false) is p; select(p, false, true) is not p (jnp.tril's mask)
                p = self.cast(p, "bool") if p.dtype != "bool" else p
                return p if bool(t.value) else self.binary("eq", p, TV("splat", "bool", value=0), "bool")
            p = self.materialise(p)
            t = self.materialise(t, dt)
            f = self.materialise(f, dt)
            out = self.new_tile(dt)
            self.em.inst("select", self.engine_for(t, f), [out.ap], [p.ap, t.ap, f.ap])
            return out
        if op == "clamp":
            lo, a, hi = args
            m = self.binary("max", a, lo, dt, swap="max")
            return self.binary("min", m, hi, dt, swap="min")
        raise unsupported_node(x, "no engine lowering for this elementwise op")

    def fold(self, x, args):
        vals = [np.asarray(a.value, dtype=ir.np_dtype(a.dtype) if a.dtype != "bool" else np.bool_) for a in args]
        from neuronxcc.starfish.penguin.hlo2penguin import fold_numpy
        attrs = dict(x.attrs)
        r = None
        if x.op == "compare":
            fn = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
                  "GE": np.greater_equal}[attrs["direction"]]
            r = fn(vals[0], vals[1])
        elif x.op == "select":
            r = vals[1] if bool(vals[0]) else vals[2]
        else:
            r = fold_numpy(x.op, [v.reshape(()) for v in vals], attrs, (), x.dtype)
        if r is None:
            return self.op(x, [self.materialise(args[0])] + list(args[1:]))
        return TV("splat", onchip_dtype(x.dtype), value=_py(np.asarray(r).reshape(()).item(), x.dtype))

    def splat(self, dtype, value):
        """A scalar tile value (later ops fold it into their immediates)."""
        return TV("splat", dtype, value=value)


def _fsplat(x):
    """The float value of a float32 Splat, else None."""
    if isinstance(x, Splat) and x.dtype == "float32":
        try:
            v = float(x.value)
        except (TypeError, ValueError):
            return None
        return v if math.isfinite(v) else None
    return None


def _affine(x, depth=0):
    """(z, scale, bias) with x = z * scale + bias through float32 adds, subtracts, multiplies and
    divides by constants (z itself when there are none)."""
    if depth < 3 and isinstance(x, Node) and x.dtype == "float32" and len(x.args) == 2 and \
            x.op in ("add", "subtract", "multiply", "divide"):
        a, b = x.args
        ca, cb = _fsplat(a), _fsplat(b)
        if cb is not None and ca is None:
            z, s, c = _affine(a, depth + 1)
            if x.op == "add":
                return z, s, c + cb
            if x.op == "subtract":
                return z, s, c - cb
            if x.op == "multiply":
                return z, s * cb, c * cb
            if cb != 0:
                return z, s / cb, c / cb
        elif ca is not None and cb is None and x.op in ("add", "multiply"):
            z, s, c = _affine(b, depth + 1)
            return (z, s, c + ca) if x.op == "add" else (z, s * ca, c * ca)
    return x, 1.0, 0.0


def _act_affine(x):
    """(ACT function, z, scale, bias) for x = f(z * scale + bias) with at least one constant
    folded into the activation's scale/bias, else None."""
    if not (isinstance(x, Node) and x.op in UNARY_ACT and x.dtype == "float32" and len(x.args) == 1):
        return None
    z, s, c = _affine(x.args[0])
    if z is x.args[0] or isinstance(z, Splat) or getattr(z, "dtype", None) != "float32":
        return None
    if not (math.isfinite(s) and math.isfinite(c)):
        return None
    return UNARY_ACT[x.op], z, s, c


def _square_of(x):
    """y for x = y * y (float32), else None."""
    if isinstance(x, Node) and x.op == "multiply" and x.dtype == "float32" and len(x.args) == 2:
        a, b = x.args
        if a is b:
            return a
    return None


def _py(v, dtype):
    """A JSON scalar for an immediate operand."""
    if isinstance(v, (bool, np.bool_)):
        return int(bool(v))
    dtype = onchip_dtype(dtype) if dtype else dtype
    if dtype and (dtype == "bool" or bdt.is_int(dtype)):
        try:
            return int(v)
        except (OverflowError, ValueError):
            return 0
    return float(v)


def _convert_scalar(v, dtype):
    if dtype == "bool":
        return int(bool(v))
    return np.asarray(v).astype(ir.np_dtype(dtype)).item()
