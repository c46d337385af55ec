"""Value ranges of integer HLO values: the [lo, hi] every element of an instruction's result lies in.

``of(module, inst)`` gives (lo, hi) (Python ints) or None when nothing useful is known. intbits
uses it to prove a shift amount inside [0, width), so the shift is the engine's plain shift with no
range compare and select around it (threefry rotates by amounts read from a loop-carried array of
constants: 13, 15, 26, 6 / 17, 29, 16, 24, and by 32 minus them).

The analysis is an interval abstract interpretation of the whole module, run once per module
(lazily, on the first query) and cached on it, keyed by the instruction objects themselves (the
cache holds them, so no key can come to stand for a later object, as an id could once its object
died); an instruction the module gained after the first query is unknown (None):
* interprocedural through ``call`` / ``fusion`` (operand k flows into parameter k), ``while`` (the
  initial tuple and the body's root both flow into the body's and the condition's parameter; the
  while's result is that parameter's range) and ``conditional`` (operand k + 1 into branch k); a
  computation called by anything else (reduce, sort, map, scatter ...) or the entry gets the full
  range of its parameters' types;
* iterated from "nothing known" over every computation until no range changes (the least fixed
  point); a parameter whose range changed WIDEN_AFTER times (a loop counter) is widened to its
  type's full range, so it settles in a few passes. If the module has not settled after MAX_PASSES
  passes nothing is claimed (every query gives None);
* an integer result that could leave its type's range (wrapping arithmetic) gets the full range of
  the type; pred is [0, 1]; floats and opcodes without a rule are unknown.
Sound, not precise: a range may be wider than the values that occur, never narrower.
"""
import numpy as np

from neuronxcc.hlo import interp_attrs as A

MAX_PASSES = 24
WIDEN_AFTER = 3
_UNKNOWN = "?"
_BITS = {"s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
         "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
# ops whose result elements are elements of operand 0 (and, for the ones listed in _JOIN, of others)
_MOVES = frozenset(["copy", "reshape", "broadcast", "transpose", "slice", "reverse", "dynamic-slice", "gather",
                    "bitcast", "copy-start", "copy-done", "opt-barrier", "optimization-barrier"])
_JOIN = {"concatenate": (0, None), "select": (1, 3), "pad": (0, 2), "dynamic-update-slice": (0, 2)}


def type_range(element_type):
    if element_type == "pred":
        return (0, 1)
    b = _BITS.get(element_type)
    if b is None:
        return None
    if element_type.startswith("u"):
        return (0, (1 << b) - 1)
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1)


def _top(shape):
    if shape.is_tuple:
        return [_top(s) for s in shape.tuple_shapes]
    r = type_range(shape.element_type)
    return _UNKNOWN if r is None else r


def _join(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_join(x, y) for x, y in zip(a, b)]
    if isinstance(a, tuple) and isinstance(b, tuple):
        return (min(a[0], b[0]), max(a[1], b[1]))
    return _UNKNOWN


def _fit(r, shape):
    """r if it is an interval inside SHAPE's type range, else the type's full range."""
    t = type_range(shape.element_type) if shape.is_array else None
    if t is None:
        return _UNKNOWN
    if isinstance(r, tuple) and t[0] <= r[0] <= r[1] <= t[1]:
        return r
    return t


class Ranges:
    def __init__(self, module):
        self.module = module
        self.val = {}
        self.callers = {}
        for comp in module.computations.values():
            for inst in comp.instructions:
                for kind, comps in self._calls(inst):
                    for k, c in enumerate(comps):
                        self.callers.setdefault(c, []).append((kind, k, inst))
        self.changes = {}
        self.ok = self._solve()

    @staticmethod
    def _calls(inst):
        op = inst.opcode
        if op == "while":
            yield "while", [inst.attrs.get("body"), inst.attrs.get("condition")]
        elif op == "conditional":
            yield "branch", list(inst.attrs.get("branch_computations") or inst.called_computations)
        elif op in ("call", "fusion"):
            c = inst.attrs.get("to_apply") or inst.attrs.get("calls")
            if c is None and inst.called_computations:
                c = inst.called_computations[0]
            yield "call", [c]
        else:
            cs = list(getattr(inst, "called_computations", None) or [])
            for key in ("to_apply", "comparator", "scatter", "select", "calls"):
                c = inst.attrs.get(key)
                if c is not None and not isinstance(c, (str, list)):
                    cs.append(c)
            if cs:
                yield "other", cs

    def _solve(self):
        comps = list(self.module.computations.values())
        for _ in range(MAX_PASSES):
            changed = False
            for comp in comps:
                for inst in comp.instructions:
                    v = self._eval(inst, comp)
                    old = self.val.get(inst)
                    if v != old:
                        if inst.opcode == "parameter" and old is not None:
                            v = self._widen(old, v, inst.shape, (inst,))
                        if v != old:
                            self.val[inst] = v
                            changed = True
            if not changed:
                return True
        return False

    def _widen(self, old, new, shape, key):
        """NEW, with each tuple leaf that has now moved WIDEN_AFTER times set to its type's range."""
        if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) and shape.is_tuple:
            return [self._widen(o, n, s, key + (k,)) for k, (o, n, s) in
                    enumerate(zip(old, new, shape.tuple_shapes))]
        if old is None or old == new:
            return new
        n = self.changes.get(key, 0) + 1
        self.changes[key] = n
        return _top(shape) if n >= WIDEN_AFTER else new

    def _v(self, inst):
        return self.val.get(inst)

    def _param(self, inst, comp):
        if comp is self.module.entry:
            return _top(inst.shape)
        k = inst.parameter_number if inst.parameter_number is not None else comp.parameters.index(inst)
        acc = None
        for kind, idx, caller in self.callers.get(comp, ()):
            if kind == "call":
                v = self._v(caller.operands[k]) if k < len(caller.operands) else _top(inst.shape)
            elif kind == "while":
                body = caller.attrs.get("body")
                v = _join(self._v(caller.operands[0]), self._v(body.root) if body is not None else None)
            elif kind == "branch":
                v = self._v(caller.operands[idx + 1]) if idx + 1 < len(caller.operands) else _top(inst.shape)
            else:
                return _top(inst.shape)
            acc = _join(acc, v)
        return acc

    def _eval(self, inst, comp):
        op = inst.opcode
        shape = inst.shape
        if op == "parameter":
            return self._param(inst, comp)
        if op == "constant":
            return _literal(inst.literal, shape)
        if op == "tuple":
            return [self._v(o) for o in inst.operands]
        if op == "get-tuple-element":
            t = self._v(inst.operands[0])
            if t is None:
                return None
            idx = A.int_attr(inst, "index")
            idx = A.int_attr(inst, "tuple_index", 0) if idx is None else idx
            return t[idx] if isinstance(t, list) and idx < len(t) else _top(shape)
        if op in ("call", "fusion"):
            c = inst.attrs.get("to_apply") or inst.attrs.get("calls") or \
                (inst.called_computations[0] if inst.called_computations else None)
            return self._v(c.root) if c is not None else _top(shape)
        if op == "while":
            body = inst.attrs.get("body")
            return self._v(body.parameters[0]) if body is not None and body.parameters else _top(shape)
        if op == "conditional":
            acc = None
            for c in inst.attrs.get("branch_computations") or inst.called_computations:
                acc = _join(acc, self._v(c.root))
            return acc
        if shape.is_tuple or not shape.is_array:
            return _top(shape)
        if type_range(shape.element_type) is None:
            return _UNKNOWN
        if shape.element_type == "pred" and op != "constant":
            return (0, 1)
        args = [self._v(o) for o in inst.operands]
        if any(a is None for a in args):
            return None
        if op == "bitcast" and inst.operands[0].shape.element_type != shape.element_type:
            return _top(shape)
        if op in _MOVES:
            return _fit(args[0], shape)
        if op in _JOIN:
            lo, hi = _JOIN[op]
            acc = None
            for a in args[lo:hi]:
                acc = _join(acc, a)
            return _fit(acc, shape)
        if op == "iota":
            n = max(shape.dims) if shape.dims else 1
            return _fit((0, max(0, n - 1)), shape)
        if any(not isinstance(a, tuple) for a in args):
            return _top(shape)
        return _fit(_arith(op, args, shape, inst), shape)




def _literal(lit, shape):
    if shape.is_tuple:
        if not isinstance(lit, (tuple, list)):
            return _top(shape)
        return [_literal(x, s) for x, s in zip(lit, shape.tuple_shapes)]
    if type_range(shape.element_type) is None or lit is None:
        return _top(shape)
    a = np.asarray(lit)
    if a.size == 0:
        return _top(shape)
    if a.dtype.kind not in "iub":
        return _top(shape)
    return _fit((int(a.min()), int(a.max())), shape)


def _arith(op, args, shape, inst):
    """Interval of an elementwise integer op (unbounded: _fit clamps to the type)."""
    if op == "convert":
        return args[0]
    if op in ("add", "subtract", "multiply", "maximum", "minimum"):
        (a0, a1), (b0, b1) = args
        if op == "add":
            return (a0 + b0, a1 + b1)
        if op == "subtract":
            return (a0 - b1, a1 - b0)
        if op == "maximum":
            return (max(a0, b0), max(a1, b1))
        if op == "minimum":
            return (min(a0, b0), min(a1, b1))
        ps = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
        return (min(ps), max(ps))
    if op == "clamp":
        (l0, l1), (x0, x1), (h0, h1) = args
        lo, hi = max(x0, l0), max(x1, l1)
        return (min(lo, h0), min(hi, h1))
    if op == "and":
        (a0, a1), (b0, b1) = args
        if a0 >= 0 and b0 >= 0:
            return (0, min(a1, b1))
        if a0 >= 0:
            return (0, a1)
        if b0 >= 0:
            return (0, b1)
        return None
    if op in ("or", "xor"):
        (a0, a1), (b0, b1) = args
        if a0 >= 0 and b0 >= 0:
            return (0, (1 << max(a1, b1).bit_length()) - 1)
        return None
    if op == "remainder":
        (a0, a1), (b0, b1) = args
        m = max(abs(b0), abs(b1))
        if m == 0:
            return None
        r = (0, min(a1, m - 1)) if a0 >= 0 else (max(a0, -(m - 1)), min(max(a1, 0), m - 1))
        # XLA: x % 0 = x, so a divisor that can be 0 leaves the dividend's range in play
        return _join(r, (a0, a1)) if b0 <= 0 <= b1 else r
    if op == "abs":
        (a0, a1), = args
        if a0 >= 0:
            return (a0, a1)
        return (0 if a1 >= 0 else -a1, max(-a0, a1))
    if op == "shift-right-logical":
        (a0, a1), _ = args
        return (0, a1) if a0 >= 0 else None
    return None


def of(module, inst):
    """(lo, hi) every element of INST's (integer array) result lies in, or None (see module doc)."""
    r = getattr(module, "_penguin_int_ranges", None)
    if r is None or r.module is not module:
        r = Ranges(module)
        try:
            module._penguin_int_ranges = r
        except AttributeError:
            pass
    if not r.ok:
        return None
    v = r.val.get(inst)
    return v if isinstance(v, tuple) else None
