"""birsim's input checks: the arrays of an inputs file against a program's parameters.

Owns: ``check_inputs`` (single rank: each ``input{i}`` of the file with its parameter's logical
shape and element type) and ``check_rank_inputs`` (``--ranks N``: the same checks, each array
either one for every rank or N stacked on a leading rank axis). A mismatch is one InputFileError
naming the file, the array, the parameter and what it takes, for the tool's one NCC_ line.
"""
import numpy as np

from neuronxcc.errors import InputFileError


def _logical_shape(t, perm):
    shape = list(t.shape)
    if perm:                                     # stored = logical.transpose(perm)
        logical = [0] * len(shape)
        for k, p in enumerate(perm):
            logical[p] = shape[k]
        shape = logical
    return shape


def _typed(a, t, key, i, name, path):
    from neuronxcc.starfish.birpy import dtypes as _dt
    want = _dt.np_dtype(t.dtype)
    if a.dtype.kind == "V" and a.dtype.itemsize == want.itemsize:
        a = a.view(want)                         # bf16/fp8 come back from .npz as raw void
    elif t.dtype == "bool" and a.dtype == np.bool_:
        a = a.astype(want)
    if a.dtype != want:
        raise InputFileError("inputs file %s: %s has dtype %s; input %d ('%s') takes %s"
                             % (path, key, a.dtype, i, name, t.dtype))
    return a


def _arrays(given, module, path):
    n = len(module.inputs)
    for i, name in enumerate(module.inputs):
        key = "input%d" % i
        if key not in given:
            raise InputFileError("inputs file %s has no %s (the program takes %d input%s: %s)"
                                 % (path, key, n, "" if n == 1 else "s", ", ".join("input%d" % k for k in range(n))))
        yield i, name, key, np.asarray(given[key])


def check_inputs(given, module, perms, path):
    """The arrays of ``given`` (input{i}) for ``module``'s inputs, each checked against its
    parameter's logical shape and element type; InputFileError naming the input otherwise."""
    out = []
    for i, name, key, a in _arrays(given, module, path):
        t = module.tensors[name]
        a = _typed(a, t, key, i, name, path)
        shape = _logical_shape(t, perms.get(("input", name)))
        if list(a.shape) != shape:
            raise InputFileError("inputs file %s: %s has shape %s; input %d ('%s') takes %s"
                                 % (path, key, list(a.shape), i, name, shape))
        out.append(a)
    return out


def check_rank_inputs(given, module, perms, path, nranks):
    """Per rank, the arrays for ``module``'s inputs: each ``input{i}`` checked as in
    ``check_inputs``, of the parameter's logical shape (the same on every rank) or with a leading
    rank axis of ``nranks``."""
    per_rank = [[] for _ in range(nranks)]
    for i, name, key, a in _arrays(given, module, path):
        t = module.tensors[name]
        a = _typed(a, t, key, i, name, path)
        shape = _logical_shape(t, perms.get(("input", name)))
        if list(a.shape) == [nranks] + shape:
            rows = [a[d] for d in range(nranks)]
        elif list(a.shape) == shape:
            rows = [a] * nranks
        else:
            raise InputFileError("inputs file %s: %s has shape %s; input %d ('%s') takes %s, or %s with the "
                                 "rank axis first on this %d-rank run"
                                 % (path, key, list(a.shape), i, name, shape, [nranks] + shape, nranks))
        for d in range(nranks):
            per_rank[d].append(rows[d])
    return per_rank
