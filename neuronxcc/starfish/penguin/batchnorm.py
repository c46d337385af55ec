"""batch-norm-training / -inference / -grad as Penguin reductions and elementwise ops.

The operand is viewed as [A, C, B] around its feature dimension (A = the
dimensions before it, B = those after). When A == 1 (torch-xla's LayerNorm:
[1, rows, D] with feature_index 1) the view is [C, B] and every statistic is a
reduction along the last axis, which row fusion (rows.py) evaluates inside the
consumer's tile: the mean, the centred variance and the normalised output are
one pass over each row tile, like the hand-written layernorm. When B == 1
(channels last) the view is [A, C]; otherwise (NCHW BatchNorm2d) the
statistics reduce axes (0, 2) of [A, C, B] with the ordinary reduce kernel.

Statistics and arithmetic are carried out in f32 whatever the operand type
(bf16 operands are widened once, results rounded once). The variance is the
biased one, taken around the mean (two passes over the data, not
E[x^2] - E[x]^2), as XLA's semantics define it.
"""
from neuronxcc.hlo import interp_attrs as A


class _Builder:
    def __init__(self, g, loc, name):
        self.g, self.loc, self.name = g, loc, name

    def op(self, kind, ins, shape, dtype, attrs=None, suffix=""):
        return self.g.add_op(kind, ins, [(self.name + suffix, tuple(shape), dtype)], attrs or {}, self.loc)[0]

    def shape(self, v):
        return self.g.values[v].shape

    def dtype(self, v):
        return self.g.values[v].dtype

    def const(self, value, shape, dtype="float32"):
        return self.op("constant", [], shape, dtype, {"value": float(value)}, ".c")

    def f32(self, v):
        if self.dtype(v) == "float32":
            return v
        return self.op("convert", [v], self.shape(v), "float32", suffix=".f32")

    def cast(self, v, dtype):
        if self.dtype(v) == dtype:
            return v
        return self.op("convert", [v], self.shape(v), dtype, suffix=".out")

    def reshape(self, v, shape):
        if tuple(self.shape(v)) == tuple(shape):
            return v
        return self.op("reshape", [v], shape, self.dtype(v), suffix=".view")

    def bin(self, kind, a, b):
        return self.op(kind, [a, b], self.shape(a), self.dtype(a), suffix="." + kind)

    def unary(self, kind, a):
        return self.op(kind, [a], self.shape(a), self.dtype(a), suffix="." + kind)

    def sum(self, v, axes):
        shape = [d for k, d in enumerate(self.shape(v)) if k not in axes]
        zero = self.op("constant", [], (), "float32", {"value": 0.0}, ".zero")
        return self.op("reduce", [v, zero], shape, "float32", {"dimensions": list(axes), "reducer": "add"}, ".sum")

    def splat(self, v):
        """The value of a splat constant (None for anything else)."""
        for op in reversed(self.g.ops):
            if v in op.outputs:
                return op.attrs.get("value") if op.kind == "constant" else None
        return None

    def mul_unless_one(self, a, b):
        """a * b, or a when b is the splat 1 (torch-xla's LayerNorm passes scale 1, offset 0)."""
        return a if self.splat(b) == 1 else self.bin("multiply", a, self.f32(b))

    def scale(self, v, k):
        return self.bin("multiply", v, self.const(k, self.shape(v)))


class _Layout:
    """The [A, C, B] view of an operand around its feature dimension."""

    def __init__(self, dims, fi):
        self.dims = tuple(dims)
        a = b = 1
        for d in dims[:fi]:
            a *= d
        for d in dims[fi + 1:]:
            b *= d
        self.c = dims[fi]
        if a == 1:
            self.view, self.axes, self.fdim = (self.c, b), (1,), 0
        elif b == 1:
            self.view, self.axes, self.fdim = (a, self.c), (0,), 1
        else:
            self.view, self.axes, self.fdim = (a, self.c, b), (0, 2), 1
        self.count = a * b

    def per_feature(self, bld, v):
        """A [C] value broadcast over the view."""
        return bld.op("broadcast", [v], self.view, bld.dtype(v), {"dimensions": [self.fdim]}, ".bcast")


def _epsilon(inst):
    v = inst.attrs.get("epsilon", 0.0)
    return float(str(v).strip('"')) if isinstance(v, str) else float(v)


def _prepare(g, inst, ins, loc):
    fi = A.int_attr(inst, "feature_index", 0)
    x = ins[0]
    lay = _Layout(g.values[x].shape, fi)
    bld = _Builder(g, loc, inst.name)
    return bld, lay


def lower_training(g, inst, ins, loc):
    """[output, batch_mean, batch_var] of a batch-norm-training instruction."""
    bld, lay = _prepare(g, inst, ins, loc)
    x, scale, offset = ins
    out_dt, stat_dt = bld.dtype(x), bld.dtype(scale)
    xv = bld.f32(bld.reshape(x, lay.view))
    inv_n = 1.0 / max(1, lay.count)
    mean = bld.scale(bld.sum(xv, lay.axes), inv_n)
    xc = bld.bin("subtract", xv, lay.per_feature(bld, mean))
    var = bld.scale(bld.sum(bld.bin("multiply", xc, xc), lay.axes), inv_n)
    inv = bld.unary("rsqrt", bld.bin("add", var, bld.const(_epsilon(inst), (lay.c,))))
    k = bld.mul_unless_one(inv, scale)
    y = bld.bin("multiply", xc, lay.per_feature(bld, k))
    if bld.splat(offset) != 0:
        y = bld.bin("add", y, lay.per_feature(bld, bld.f32(offset)))
    y = bld.reshape(bld.cast(y, out_dt), lay.dims)
    return [y, bld.cast(mean, stat_dt), bld.cast(var, stat_dt)]


def lower_inference(g, inst, ins, loc):
    """The output of a batch-norm-inference instruction."""
    bld, lay = _prepare(g, inst, ins, loc)
    x, scale, offset, mean, var = ins
    out_dt = bld.dtype(x)
    xv = bld.f32(bld.reshape(x, lay.view))
    inv = bld.unary("rsqrt", bld.bin("add", bld.f32(var), bld.const(_epsilon(inst), (lay.c,))))
    k = bld.mul_unless_one(inv, scale)
    # y = x * k + (offset - mean * k): one multiply-add per element
    b = bld.bin("subtract", bld.f32(offset), bld.bin("multiply", bld.f32(mean), k))
    y = bld.bin("add", bld.bin("multiply", xv, lay.per_feature(bld, k)), lay.per_feature(bld, b))
    return bld.reshape(bld.cast(y, out_dt), lay.dims)


def lower_grad(g, inst, ins, loc):
    """[grad_operand, grad_scale, grad_offset] of a batch-norm-grad instruction."""
    bld, lay = _prepare(g, inst, ins, loc)
    x, scale, mean, var, dy = ins
    out_dt, stat_dt = bld.dtype(x), bld.dtype(scale)
    xv = bld.f32(bld.reshape(x, lay.view))
    dyv = bld.f32(bld.reshape(dy, lay.view))
    inv_n = 1.0 / max(1, lay.count)
    inv = bld.unary("rsqrt", bld.bin("add", bld.f32(var), bld.const(_epsilon(inst), (lay.c,))))
    xc = bld.bin("subtract", xv, lay.per_feature(bld, bld.f32(mean)))
    grad_offset = bld.sum(dyv, lay.axes)
    sum_dy_xc = bld.sum(bld.bin("multiply", dyv, xc), lay.axes)
    grad_scale = bld.bin("multiply", sum_dy_xc, inv)
    # dx = scale*inv * (dy - mean(dy) - xc * mean(dy*xc) * inv^2)
    k = bld.mul_unless_one(inv, scale)
    c1 = bld.scale(grad_offset, inv_n)
    c2 = bld.scale(bld.bin("multiply", sum_dy_xc, bld.bin("multiply", inv, inv)), inv_n)
    t = bld.bin("subtract", bld.bin("subtract", dyv, lay.per_feature(bld, c1)),
                bld.bin("multiply", xc, lay.per_feature(bld, c2)))
    dx = bld.bin("multiply", t, lay.per_feature(bld, k))
    dx = bld.reshape(bld.cast(dx, out_dt), lay.dims)
    return [dx, bld.cast(grad_scale, stat_dt), bld.cast(grad_offset, stat_dt)]


LOWERINGS = {"batch-norm-training": lower_training, "batch-norm-inference": lower_inference,
             "batch-norm-grad": lower_grad}
