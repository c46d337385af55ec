"""Interpreter handlers for batch-norm-training, batch-norm-inference and batch-norm-grad.

XLA's semantics (operation semantics, BatchNormTraining / Inference / Grad): the
statistics of feature ``feature_index`` are taken over every other dimension;
the variance is the biased (population) variance; ``epsilon`` is added to it
before the reciprocal square root. Training returns (output, batch_mean,
batch_var); grad returns (grad_operand, grad_scale, grad_offset). Arithmetic is
carried out in f64 and rounded to the operand's type once per result, so the
interpreter is at least as accurate as XLA:CPU's expansion (which computes the
variance as E[x^2] - E[x]^2 in the operand type).
"""
import numpy as np

from neuronxcc.hlo.interp_attrs import int_attr
from neuronxcc.hlo.interp_base import cast, dtype_of, handler


def _epsilon(inst):
    v = inst.attrs.get("epsilon", 0.0)
    return float(str(v).strip('"')) if isinstance(v, str) else float(v)


def _axes(inst, rank):
    fi = int_attr(inst, "feature_index", 0)
    return fi, tuple(d for d in range(rank) if d != fi)


def _per_feature(v, fi, rank):
    """A [C] vector shaped to broadcast against the operand along feature ``fi``."""
    shape = [1] * rank
    shape[fi] = v.shape[0]
    return v.reshape(shape)


@handler("batch_norm_training")
def batch_norm_training(ev, inst, args):
    x, scale, offset = (np.asarray(a, dtype=np.float64) for a in args)
    rank = x.ndim
    fi, axes = _axes(inst, rank)
    mean = x.mean(axis=axes)
    var = ((x - _per_feature(mean, fi, rank)) ** 2).mean(axis=axes)
    inv = 1.0 / np.sqrt(var + _epsilon(inst))
    y = (x - _per_feature(mean, fi, rank)) * _per_feature(inv * scale, fi, rank) + _per_feature(offset, fi, rank)
    shapes = inst.shape.tuple_shapes
    return (cast(y, dtype_of(shapes[0])), cast(mean, dtype_of(shapes[1])), cast(var, dtype_of(shapes[2])))


@handler("batch_norm_inference")
def batch_norm_inference(ev, inst, args):
    x, scale, offset, mean, var = (np.asarray(a, dtype=np.float64) for a in args)
    rank = x.ndim
    fi, _ = _axes(inst, rank)
    inv = 1.0 / np.sqrt(var + _epsilon(inst))
    y = (x - _per_feature(mean, fi, rank)) * _per_feature(inv * scale, fi, rank) + _per_feature(offset, fi, rank)
    return cast(y, dtype_of(inst.shape))


@handler("batch_norm_grad")
def batch_norm_grad(ev, inst, args):
    x, scale, mean, var, dy = (np.asarray(a, dtype=np.float64) for a in args)
    rank = x.ndim
    fi, axes = _axes(inst, rank)
    n = x.size // max(1, x.shape[fi])
    inv = 1.0 / np.sqrt(var + _epsilon(inst))
    xc = x - _per_feature(mean, fi, rank)
    grad_offset = dy.sum(axis=axes)
    sum_dy_xc = (dy * xc).sum(axis=axes)
    grad_scale = sum_dy_xc * inv
    dx = _per_feature(scale * inv, fi, rank) * (
        dy - _per_feature(grad_offset / n, fi, rank) - xc * _per_feature(sum_dy_xc / n * inv * inv, fi, rank))
    shapes = inst.shape.tuple_shapes
    return (cast(dx, dtype_of(shapes[0])), cast(grad_scale, dtype_of(shapes[1])),
            cast(grad_offset, dtype_of(shapes[2])))
