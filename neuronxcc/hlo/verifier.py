"""Structural and shape checks of a module read from any form.

``verify_module`` raises HloVerifyError naming the instruction (and the
user's source line when the metadata carries it) for: operands that are not
defined before use in the same computation, missing or duplicate parameter
numbers, calls whose argument count or shapes do not match the callee, and
shapes that disagree for the ops whose result shape follows simply from the
operands (elementwise, broadcast, reshape, transpose, dot, slice,
concatenate, reduce, tuple/get-tuple-element, select, convert, while).
"""
from neuronxcc.errors import CompilerError, HloVerifyError

UNARY_ELEMENTWISE = frozenset((
    "abs", "ceil", "cbrt", "cosine", "count-leading-zeros", "erf", "exponential", "exponential-minus-one",
    "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh", "convert",
    "bitcast-convert", "reduce-precision", "copy", "stochastic-convert",
    "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh"))
BINARY_ELEMENTWISE = frozenset((
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "and", "or", "xor",
    "atan2", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare", "complex"))
ARITY = {"broadcast": 1, "reshape": 1, "transpose": 1, "slice": 1, "reverse": 1, "get-tuple-element": 1,
         "select": 3, "clamp": 3, "dot": 2, "convolution": 2, "pad": 2, "gather": 2, "while": 1, "iota": 0,
         "parameter": 0, "constant": 0}
ARITY.update({op: 1 for op in UNARY_ELEMENTWISE if op not in ("stochastic-convert",)})
ARITY.update({op: 2 for op in BINARY_ELEMENTWISE})


def _fail(instr, comp, msg):
    loc = instr.source_location() if hasattr(instr, "source_location") else ""
    raise HloVerifyError("%s (instruction %s in computation %s%s)"
                         % (msg, instr.name, comp.name, ", from " + loc if loc else ""))


def verify_module(module):
    try:
        _verify(module)
    except CompilerError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise HloVerifyError("malformed HLO module %s: %s" % (module.name, e)) from e


def _check_call_graph(module):
    """Computations may not call themselves, directly or through others."""
    state = {}
    for start in module.computations.values():
        if start in state:
            continue
        stack = [(start, iter([cc for i in start.instructions for cc in i.called_computations]))]
        state[start] = 1
        while stack:
            comp, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[comp] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                raise HloVerifyError("computation %s calls itself (through %s)"
                                     % (nxt.name, " -> ".join(c.name for c, _ in stack)))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter([cc for i in nxt.instructions for cc in i.called_computations])))


def _verify(module):
    _check_call_graph(module)
    names = set()
    comps = set(module.computations.values())
    for comp in module.computations.values():
        if not comp.instructions:
            raise HloVerifyError("computation %s has no instructions" % comp.name)
        if comp.root not in comp.instructions:
            raise HloVerifyError("computation %s: its root is not one of its instructions" % comp.name)
        defined = set()
        pnums = {}
        for instr in comp.instructions:
            if instr.name in names:
                _fail(instr, comp, "instruction name %s is used twice" % instr.name)
            names.add(instr.name)
            for o in instr.operands:
                if o not in defined:
                    _fail(instr, comp, "operand %s is not defined before its use in this computation" % o.name)
            for cc in instr.called_computations:
                if cc not in comps:
                    _fail(instr, comp, "called computation %s is not in the module" % cc.name)
            if instr.opcode == "parameter":
                n = instr.parameter_number
                if n is None or n < 0:
                    _fail(instr, comp, "parameter without a valid parameter number")
                if n in pnums:
                    _fail(instr, comp, "parameter number %d is used twice (also by %s)" % (n, pnums[n].name))
                pnums[n] = instr
            _check_shape(instr, comp)
            defined.add(instr)
        missing = sorted(set(range(len(pnums))) - set(pnums))
        if missing:
            raise HloVerifyError("computation %s is missing parameter %d (it has parameters %s)"
                                 % (comp.name, missing[0], sorted(pnums)))


def _dims(shape):
    return list(shape.dims)


def _check_callee(instr, comp, callee, arg_shapes, what):
    params = callee.parameters
    if len(params) != len(arg_shapes):
        _fail(instr, comp, "%s %s takes %d parameters but is given %d"
              % (what, callee.name, len(params), len(arg_shapes)))
    for p, s in zip(params, arg_shapes):
        if not p.shape.same_dims(s):
            _fail(instr, comp, "%s %s parameter %d has shape %s but is given %s"
                  % (what, callee.name, p.parameter_number, p.shape.to_text(False), s.to_text(False)))


NEEDS_TO_APPLY = frozenset(("reduce", "reduce-window", "map", "sort", "scatter", "call", "all-reduce",
                            "reduce-scatter"))


def _check_shape(instr, comp):
    op, ops, shape, a = instr.opcode, instr.operands, instr.shape, instr.attrs
    if op in NEEDS_TO_APPLY and "to_apply" not in a:
        _fail(instr, comp, "%s needs a to_apply computation" % op)
    if op == "select-and-scatter" and ("select" not in a or "scatter" not in a):
        _fail(instr, comp, "select-and-scatter needs select and scatter computations")
    if op in ARITY and len(ops) != ARITY[op]:
        _fail(instr, comp, "%s takes %d operands, has %d" % (op, ARITY[op], len(ops)))
    if op == "bitcast-convert" and ops:
        if ops[0].shape.is_array and shape.is_array and ops[0].shape.nbytes() != shape.nbytes():
            _fail(instr, comp, "bitcast-convert of %s to %s changes the byte size"
                  % (ops[0].shape.to_text(False), shape.to_text(False)))
    elif op in UNARY_ELEMENTWISE and ops:
        if _dims(ops[0].shape) != _dims(shape):
            _fail(instr, comp, "%s result %s does not match its operand %s"
                  % (op, shape.to_text(False), ops[0].shape.to_text(False)))
    elif op in BINARY_ELEMENTWISE:
        l, r = ops[0].shape, ops[1].shape
        if _dims(l) != _dims(r) or _dims(l) != _dims(shape):
            _fail(instr, comp, "%s operand shapes %s and %s and result %s do not agree"
                  % (op, l.to_text(False), r.to_text(False), shape.to_text(False)))
        if op == "compare" and shape.element_type != "pred":
            _fail(instr, comp, "compare must give pred, not %s" % shape.element_type)
        if op != "compare" and op != "complex" and not (l.element_type == r.element_type == shape.element_type):
            _fail(instr, comp, "%s mixes element types %s, %s -> %s"
                  % (op, l.element_type, r.element_type, shape.element_type))
    elif op == "select":
        p, t, f = (o.shape for o in ops)
        if _dims(t) != _dims(shape) or _dims(f) != _dims(shape) or (p.dims and _dims(p) != _dims(shape)):
            _fail(instr, comp, "select shapes %s, %s, %s -> %s do not agree"
                  % (p.to_text(False), t.to_text(False), f.to_text(False), shape.to_text(False)))
    elif op == "broadcast":
        dims = a.get("dimensions", ())
        o = ops[0].shape
        if len(dims) != o.rank:
            _fail(instr, comp, "broadcast dimensions=%s do not match operand rank %d" % (list(dims), o.rank))
        for k, d in enumerate(dims):
            if d >= shape.rank or shape.dims[d] != o.dims[k]:
                _fail(instr, comp, "broadcast of %s to %s with dimensions=%s: sizes do not agree"
                      % (o.to_text(False), shape.to_text(False), list(dims)))
    elif op == "reshape":
        if ops[0].shape.numel() != shape.numel():
            _fail(instr, comp, "reshape of %s to %s changes the element count"
                  % (ops[0].shape.to_text(False), shape.to_text(False)))
    elif op == "transpose":
        perm = list(a.get("dimensions", ()))
        o = ops[0].shape
        if sorted(perm) != list(range(o.rank)) or [o.dims[p] for p in perm] != _dims(shape):
            _fail(instr, comp, "transpose of %s by %s does not give %s" % (o.to_text(False), perm, shape.to_text(False)))
    elif op == "get-tuple-element":
        o = ops[0].shape
        k = a.get("index", -1)
        if not o.is_tuple or not 0 <= k < len(o.tuple_shapes):
            _fail(instr, comp, "get-tuple-element index %s out of range for %s" % (k, o.to_text(False)))
        if not o.tuple_shapes[k].same_dims(shape):
            _fail(instr, comp, "get-tuple-element result %s is not element %d of %s"
                  % (shape.to_text(False), k, o.to_text(False)))
    elif op == "tuple":
        if not shape.is_tuple or len(shape.tuple_shapes) != len(ops) or \
                not all(s.same_dims(o.shape) for s, o in zip(shape.tuple_shapes, ops)):
            _fail(instr, comp, "tuple shape %s does not match its operands" % shape.to_text(False))
    elif op == "dot":
        l, r = ops[0].shape, ops[1].shape
        lb, rb = a.get("lhs_batch_dims", ()), a.get("rhs_batch_dims", ())
        lc, rc = a.get("lhs_contracting_dims", ()), a.get("rhs_contracting_dims", ())
        for side, sh, ds in (("lhs", l, tuple(lb) + tuple(lc)), ("rhs", r, tuple(rb) + tuple(rc))):
            if len(set(ds)) != len(ds) or not all(0 <= x < sh.rank for x in ds):
                _fail(instr, comp, "dot %s batch/contracting dimensions %s are not distinct dimensions of %s"
                      % (side, list(ds), sh.to_text(False)))
        if len(lb) != len(rb) or len(lc) != len(rc) or any(l.dims[x] != r.dims[y] for x, y in zip(lb, rb)) or \
                any(l.dims[x] != r.dims[y] for x, y in zip(lc, rc)):
            _fail(instr, comp, "dot of %s and %s: batch/contracting dimensions do not agree"
                  % (l.to_text(False), r.to_text(False)))
        want = [l.dims[d] for d in lb] + [l.dims[d] for d in range(l.rank) if d not in lb and d not in lc] + \
               [r.dims[d] for d in range(r.rank) if d not in rb and d not in rc]
        if want != _dims(shape):
            _fail(instr, comp, "dot of %s and %s gives %s, not %s"
                  % (l.to_text(False), r.to_text(False), want, shape.to_text(False)))
    elif op == "slice":
        sl = a.get("slice", ())
        o = ops[0].shape
        if len(sl) != o.rank:
            _fail(instr, comp, "slice has %d ranges for rank %d" % (len(sl), o.rank))
        want = []
        for (start, limit, stride), d in zip(sl, o.dims):
            if not (0 <= start <= limit <= d) or stride < 1:
                _fail(instr, comp, "slice range [%d:%d:%d] out of bounds for size %d" % (start, limit, stride, d))
            want.append((limit - start + stride - 1) // stride)
        if want != _dims(shape):
            _fail(instr, comp, "slice result %s should be %s" % (shape.to_text(False), want))
    elif op == "concatenate":
        dims = a.get("dimensions", ())
        if len(dims) != 1 or not ops:
            _fail(instr, comp, "concatenate needs one dimension and operands")
        d = dims[0]
        if not 0 <= d < ops[0].shape.rank or any(o.shape.rank != ops[0].shape.rank for o in ops):
            _fail(instr, comp, "concatenate dimension %d is not a dimension of every operand (%s)"
                  % (d, ", ".join(o.shape.to_text(False) for o in ops)))
        total = sum(o.shape.dims[d] for o in ops)
        want = list(ops[0].shape.dims)
        want[d] = total
        if want != _dims(shape):
            _fail(instr, comp, "concatenate result %s should have dims %s" % (shape.to_text(False), want))
    elif op == "reduce":
        n = len(ops) // 2
        dims = set(a.get("dimensions", ()))
        outs = shape.tuple_shapes if shape.is_tuple else (shape,)
        if len(ops) % 2 or len(outs) != n:
            _fail(instr, comp, "reduce with %d operands and result %s" % (len(ops), shape.to_text(False)))
        for o, s in zip(ops[:n], outs):
            want = [x for k, x in enumerate(o.shape.dims) if k not in dims]
            if want != _dims(s):
                _fail(instr, comp, "reduce of %s over %s gives %s, not %s"
                      % (o.shape.to_text(False), sorted(dims), want, s.to_text(False)))
        if "to_apply" in a:
            _check_callee(instr, comp, a["to_apply"], [o.shape for o in ops[n:]] * 2, "reducer")
    elif op == "call" and "to_apply" in a:
        _check_callee(instr, comp, a["to_apply"], [o.shape for o in ops], "callee")
        if not a["to_apply"].root.shape.same_dims(shape):
            _fail(instr, comp, "call result %s differs from %s's result %s"
                  % (shape.to_text(False), a["to_apply"].name, a["to_apply"].root.shape.to_text(False)))
    elif op == "while":
        body, cond = a.get("body"), a.get("condition")
        if body is None or cond is None:
            _fail(instr, comp, "while needs body and condition")
        _check_callee(instr, comp, body, [ops[0].shape], "while body")
        _check_callee(instr, comp, cond, [ops[0].shape], "while condition")
        if not body.root.shape.same_dims(shape) or not ops[0].shape.same_dims(shape):
            _fail(instr, comp, "while body result %s differs from the loop state %s"
                  % (body.root.shape.to_text(False), shape.to_text(False)))
        if cond.root.shape.element_type != "pred" or cond.root.shape.dims:
            _fail(instr, comp, "while condition %s must return pred[]" % cond.name)
    elif op == "conditional":
        branches = a.get("branch_computations", ())
        if len(ops) != len(branches) + 1:
            _fail(instr, comp, "conditional has %d branches and %d operands" % (len(branches), len(ops)))
        for b, o in zip(branches, ops[1:]):
            _check_callee(instr, comp, b, [o.shape], "branch")
    elif op == "pad":
        o, pads = ops[0].shape, a.get("padding", ())
        if len(pads) != o.rank:
            _fail(instr, comp, "pad has %d padding entries for rank %d" % (len(pads), o.rank))
        want = [lo + hi + d + max(d - 1, 0) * it for (lo, hi, it), d in zip(pads, o.dims)]
        if any(it < 0 for _, _, it in pads) or want != _dims(shape):
            _fail(instr, comp, "pad of %s gives %s, not %s" % (o.to_text(False), want, shape.to_text(False)))
    elif op == "iota":
        if not 0 <= a.get("iota_dimension", -1) < max(shape.rank, 1) or not shape.is_array:
            _fail(instr, comp, "iota_dimension %s out of range for %s" % (a.get("iota_dimension"), shape.to_text(False)))
    elif op == "dynamic-slice":
        o, sizes = ops[0].shape, tuple(a.get("dynamic_slice_sizes", ()))
        if len(ops) != 1 + o.rank or len(sizes) != o.rank or sizes != shape.dims or \
                any(sz > d for sz, d in zip(sizes, o.dims)):
            _fail(instr, comp, "dynamic-slice of %s with sizes %s and %d indices gives %s"
                  % (o.to_text(False), list(sizes), len(ops) - 1, shape.to_text(False)))
    elif op == "dynamic-update-slice":
        o, u = ops[0].shape, ops[1].shape
        if len(ops) != 2 + o.rank or u.rank != o.rank or _dims(o) != _dims(shape) or \
                any(x > d for x, d in zip(u.dims, o.dims)):
            _fail(instr, comp, "dynamic-update-slice of %s with update %s does not fit"
                  % (o.to_text(False), u.to_text(False)))
    elif op in ("reverse", "clamp", "map") or (op == "sort" and not shape.is_tuple):
        main = ops[1] if op == "clamp" else ops[0]
        if _dims(main.shape) != _dims(shape):
            _fail(instr, comp, "%s result %s does not match its operand %s"
                  % (op, shape.to_text(False), main.shape.to_text(False)))
    elif op == "convolution":
        _check_convolution(instr, comp)
    elif op == "reduce-window":
        n = len(ops) // 2
        outs = shape.tuple_shapes if shape.is_tuple else (shape,)
        window = a.get("window", ())
        if len(ops) % 2 or len(outs) != n or len(window) != ops[0].shape.rank:
            _fail(instr, comp, "reduce-window with %d operands, a %d-dimensional window and result %s"
                  % (len(ops), len(window), shape.to_text(False)))
        want = [_window_out(d, w) for d, w in zip(ops[0].shape.dims, window)]
        for o, s_ in zip(ops[:n], outs):
            if want != _dims(s_) or _dims(o.shape) != _dims(ops[0].shape):
                _fail(instr, comp, "reduce-window of %s gives %s, not %s"
                      % (o.shape.to_text(False), want, s_.to_text(False)))
    elif op == "select-and-scatter":
        if _dims(ops[0].shape) != _dims(shape):
            _fail(instr, comp, "select-and-scatter result %s differs from its operand %s"
                  % (shape.to_text(False), ops[0].shape.to_text(False)))
        window = a.get("window", ())
        want = [_window_out(d, w) for d, w in zip(ops[0].shape.dims, window)]
        if len(window) != ops[0].shape.rank or want != _dims(ops[1].shape):
            _fail(instr, comp, "select-and-scatter source %s does not match the window's output %s"
                  % (ops[1].shape.to_text(False), want))
    elif op == "gather":
        _check_gather(instr, comp)
    elif op == "scatter":
        n = (len(ops) - 1) // 2
        outs = shape.tuple_shapes if shape.is_tuple else (shape,)
        if len(ops) < 3 or len(ops) % 2 == 0 or len(outs) != n or \
                any(_dims(o.shape) != _dims(s_) for o, s_ in zip(ops[:n], outs)):
            _fail(instr, comp, "scatter result %s does not match its operands" % shape.to_text(False))
    elif op == "constant":
        lit = instr.literal
        if shape.is_array and (lit is None or not hasattr(lit, "shape") or tuple(lit.shape) != shape.dims
                               or lit.dtype != shape.numpy_dtype()):
            _fail(instr, comp, "constant literal does not match its shape %s" % shape.to_text(False))


def _window_out(size, w):
    """Output size of one window dimension (XLA's windowed-op shape rule)."""
    dilated_base = (size - 1) * w.base_dilation + 1 if size else 0
    padded = dilated_base + w.padding_low + w.padding_high
    span = (w.size - 1) * w.window_dilation + 1
    if w.stride < 1 or w.size < 1 or w.window_dilation < 1 or w.base_dilation < 1:
        return -1
    return (padded - span) // w.stride + 1 if padded >= span else 0


def _check_convolution(instr, comp):
    lhs, rhs = (o.shape for o in instr.operands)
    a, shape = instr.attrs, instr.shape
    d = a.get("dim_labels")
    if d is None:
        _fail(instr, comp, "convolution without dim_labels")
    n = len(d.input_spatial_dimensions)
    if not (lhs.rank == rhs.rank == shape.rank == n + 2):
        _fail(instr, comp, "convolution of ranks %d and %d with %d spatial dimensions" % (lhs.rank, rhs.rank, n))
    g, bg = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    batch, feat = lhs.dims[d.input_batch_dimension], lhs.dims[d.input_feature_dimension]
    kin, kout = rhs.dims[d.kernel_input_feature_dimension], rhs.dims[d.kernel_output_feature_dimension]
    if g < 1 or bg < 1 or feat != kin * g or kout % g or batch % bg or kout % bg:
        _fail(instr, comp, "convolution features do not agree: input %d, kernel %dx%d, groups %d, batch groups %d"
              % (feat, kin, kout, g, bg))
    window = a.get("window", ())
    if len(window) != n or any(w.size != rhs.dims[k] for w, k in zip(window, d.kernel_spatial_dimensions)):
        _fail(instr, comp, "convolution window does not match the kernel %s" % rhs.to_text(False))
    want = [0] * shape.rank
    want[d.output_batch_dimension] = batch // bg
    want[d.output_feature_dimension] = kout
    for k in range(n):
        want[d.output_spatial_dimensions[k]] = _window_out(lhs.dims[d.input_spatial_dimensions[k]], window[k])
    if want != _dims(shape):
        _fail(instr, comp, "convolution of %s and %s gives %s, not %s"
              % (lhs.to_text(False), rhs.to_text(False), want, shape.to_text(False)))


def _check_gather(instr, comp):
    operand, idx = (o.shape for o in instr.operands)
    a, shape = instr.attrs, instr.shape
    sizes = tuple(a.get("slice_sizes", ()))
    collapsed, batching = set(a.get("collapsed_slice_dims", ())), set(a.get("operand_batching_dims", ()))
    offset_dims, ivd = tuple(a.get("offset_dims", ())), a.get("index_vector_dim", idx.rank)
    if len(sizes) != operand.rank or any(s_ > d for s_, d in zip(sizes, operand.dims)) or \
            any(sizes[c] > 1 for c in collapsed | batching if c < len(sizes)) or not 0 <= ivd <= idx.rank:
        _fail(instr, comp, "gather slice_sizes %s do not fit operand %s" % (list(sizes), operand.to_text(False)))
    offsets = [s_ for k, s_ in enumerate(sizes) if k not in collapsed and k not in batching]
    batch = [d for k, d in enumerate(idx.dims) if k != ivd]
    if len(offsets) != len(offset_dims) or shape.rank != len(offsets) + len(batch):
        _fail(instr, comp, "gather result %s has the wrong rank" % shape.to_text(False))
    want, oi, bi = [], iter(offsets), iter(batch)
    for k in range(shape.rank):
        want.append(next(oi) if k in offset_dims else next(bi))
    if want != _dims(shape):
        _fail(instr, comp, "gather from %s with indices %s gives %s, not %s"
              % (operand.to_text(False), idx.to_text(False), want, shape.to_text(False)))
