"""Interpreter handlers for the collectives and the device ids: all-reduce,
all-gather, reduce-scatter, all-to-all, collective-permute (and their async
-start/-done forms), replica-id, partition-id.

Each rank of an N-rank program runs its own ``Evaluator`` (``ev.rank`` its
global device id, ``ev.space`` the module's ``RankSpace``, ``ev.rv`` the
shared ``Rendezvous``; ``neuronxcc.hlo.interpreter.evaluate_ranks`` sets them up).
A one-rank evaluation needs no rendezvous: every group is that rank alone.

Semantics (XLA operation semantics; groups by ``neuronxcc.collectives.groups``):
  * all-reduce: the members' operands combined with ``to_apply`` elementwise,
    left to right in group order (rounded to the element type at each step,
    as the reducer computation says); several operands reduce independently.
  * all-gather: members' operands concatenated along ``dimensions`` in group order.
  * reduce-scatter: the all-reduce split along ``dimensions`` into group-size
    blocks; member k keeps block k.
  * all-to-all: with ``dimensions={d}`` the operand splits along d into
    group-size blocks, block j goes to member j, and the received blocks are
    concatenated along d in group order; without dimensions (tuple form)
    operand j goes to member j and result i came from member i.
  * collective-permute: the value of the source whose pair targets this rank,
    zeros when none does.
  * -start returns what XLA's shape says (all-reduce-start: the result;
    all-gather-start / collective-permute-start: a tuple of the operand, the
    result and zero contexts); -done takes the result.
"""
import numpy as np

from neuronxcc.collectives import groups as _g
from neuronxcc.errors import CollectiveError, source_location, unsupported_inst
from neuronxcc.hlo.interp_attrs import attr, computation, int_list
from neuronxcc.hlo.interp_base import dims_of, dtype_of, handler, is_tuple_shape

__all__ = []


def _where(inst):
    loc = source_location(getattr(inst, "metadata", None))
    return "%s %s%s" % (inst.opcode, inst.name, " at %s" % loc if loc else "")


def _space(ev):
    sp = getattr(ev, "space", None)
    if sp is None:
        from neuronxcc.hlo.ranks import rank_space
        sp = ev.space = rank_space(ev.module)
    return sp


def _groups(ev, inst):
    """(my group, my position) for a group collective, cached per instruction."""
    key = ("collective_groups", id(inst))
    g = ev.cache.get(key)
    if g is None:
        sp = _space(ev)
        mode = _g.group_mode(inst.opcode, attr(inst, "channel_id"), bool(attr(inst, "use_global_device_ids")),
                             _where(inst))
        g = ev.cache[key] = _g.participant_groups(mode, attr(inst, "replica_groups"), sp, _where(inst))
    grp, pos = _g.group_of(g, getattr(ev, "rank", 0))
    if grp is None:
        raise CollectiveError("%s: rank %d is in none of its replica groups" % (_where(inst), ev.rank),
                              code="NCC_ECCL002")
    return grp, pos


def _exchange(ev, inst, group, value):
    """Values of every member of GROUP (in group order); VALUE is this rank's contribution."""
    if len(group) == 1:
        return [value]
    rv = getattr(ev, "rv", None)
    if rv is None:
        raise CollectiveError("%s needs %d ranks (%r); run the program with every rank "
                              "(xla_infergoldens --ranks, neuronxcc.hlo.interpreter.evaluate_ranks)"
                              % (_where(inst), _space(ev).size, _space(ev)), code="NCC_ECCL001")
    sig = "%s of %s over ranks %s" % (inst.opcode, _sig(value), list(group))
    return rv.exchange(ev.rank, group, sig, value, _where(inst))


def _sig(v):
    if isinstance(v, tuple):
        return ", ".join(_sig(x) for x in v)
    if isinstance(v, np.ndarray):
        return "%s%s" % (v.dtype, list(v.shape))
    return type(v).__name__


def _operands(inst, args):
    """The array operands (a single tuple operand counts as its leaves)."""
    if len(args) == 1 and isinstance(args[0], tuple):
        return list(args[0])
    return list(args)


def _result(inst, vals):
    s = inst.shape
    if is_tuple_shape(s):
        return tuple(vals)
    return vals[0]


# -- device ids --------------------------------------------------------------------

@handler("replica_id")
def h_replica_id(ev, inst, args):
    r = _space(ev).replica_of(getattr(ev, "rank", 0))
    return np.full(dims_of(inst.shape), r, dtype_of(inst.shape))


@handler("partition_id")
def h_partition_id(ev, inst, args):
    p = _space(ev).partition_of(getattr(ev, "rank", 0))
    return np.full(dims_of(inst.shape), p, dtype_of(inst.shape))


# -- reductions ----------------------------------------------------------------------

def _all_reduce(ev, inst, xs):
    group, _ = _groups(ev, inst)
    got = _exchange(ev, inst, group, tuple(xs))
    comp = computation(ev, inst, "to_apply")
    out = []
    for k in range(len(xs)):
        acc = got[0][k]
        for other in got[1:]:
            acc = ev.apply(comp, [acc, other[k]])
        out.append(np.asarray(acc).astype(xs[k].dtype, copy=False).reshape(xs[k].shape))
    return out


@handler("all_reduce")
def h_all_reduce(ev, inst, args):
    return _result(inst, _all_reduce(ev, inst, _operands(inst, args)))


@handler("reduce_scatter")
def h_reduce_scatter(ev, inst, args):
    xs = _operands(inst, args)
    group, pos = _groups(ev, inst)
    d = int_list(inst, "dimensions")[0]
    red = _all_reduce(ev, inst, xs)
    n = len(group)
    out = []
    for r in red:
        if r.shape[d] % n:
            raise CollectiveError("%s: dimension %d of size %d does not split into %d blocks"
                                  % (_where(inst), d, r.shape[d], n), code="NCC_ECCL002")
        b = r.shape[d] // n
        out.append(np.ascontiguousarray(np.take(r, np.arange(pos * b, (pos + 1) * b), axis=d)))
    return _result(inst, out)


# -- data movement ---------------------------------------------------------------------

def _all_gather(ev, inst, xs):
    group, _ = _groups(ev, inst)
    d = int_list(inst, "dimensions")[0]
    got = _exchange(ev, inst, group, tuple(xs))
    return [np.concatenate([g[k] for g in got], axis=d) for k in range(len(xs))]


@handler("all_gather")
def h_all_gather(ev, inst, args):
    return _result(inst, _all_gather(ev, inst, _operands(inst, args)))


@handler("all_gather_start")
def h_all_gather_start(ev, inst, args):
    xs = _operands(inst, args)
    res = _all_gather(ev, inst, xs)
    s = inst.shape
    if len(xs) == 1:
        return (xs[0], res[0])
    return (tuple(xs), tuple(res)) if is_tuple_shape(s.tuple_shapes[0]) else (xs[0], res[0])


@handler("all_to_all")
def h_all_to_all(ev, inst, args):
    xs = _operands(inst, args)
    group, pos = _groups(ev, inst)
    n = len(group)
    dims = int_list(inst, "dimensions")
    if dims:
        d = dims[0]
        blocks = []
        for x in xs:
            if x.shape[d] % n:
                raise CollectiveError("%s: dimension %d of size %d does not split into %d blocks"
                                      % (_where(inst), d, x.shape[d], n), code="NCC_ECCL002")
            blocks.append(np.split(x, n, axis=d))
        got = _exchange(ev, inst, group, tuple(xs))
        out = []
        for k, x in enumerate(xs):
            b = x.shape[d] // n
            out.append(np.concatenate([np.take(g[k], np.arange(pos * b, (pos + 1) * b), axis=d) for g in got],
                                      axis=d))
        return _result(inst, out)
    if len(xs) != n:
        raise CollectiveError("%s: the tuple form takes one operand per group member (%d), got %d"
                              % (_where(inst), n, len(xs)), code="NCC_ECCL002")
    got = _exchange(ev, inst, group, tuple(xs))
    return _result(inst, [got[i][pos] for i in range(n)])


def _permute(ev, inst, x):
    key = ("permute_pairs", id(inst))
    pairs = ev.cache.get(key)
    sp = _space(ev)
    if pairs is None:
        if len(inst.operands) != 1:
            raise unsupported_inst(inst, "the in-place form (%d operands)" % len(inst.operands))
        mode = _g.group_mode(inst.opcode, attr(inst, "channel_id"), None, _where(inst))
        pairs = ev.cache[key] = _g.permute_pairs(mode, attr(inst, "source_target_pairs") or (), sp, _where(inst))
    me = getattr(ev, "rank", 0)
    # every rank meets every other rank of the program at a permute: one "group" of all devices,
    # so a rank that never reaches it is reported instead of leaving its targets waiting
    everyone = tuple(range(sp.size))
    if len(everyone) == 1:
        got = [x]
    else:
        got = _exchange(ev, inst, everyone, x)
    src = [s for s, t in pairs if t == me]
    if not src:
        return np.zeros_like(x)
    return got[src[0]]


@handler("collective_permute")
def h_collective_permute(ev, inst, args):
    return _permute(ev, inst, args[0])


@handler("collective_permute_start")
def h_collective_permute_start(ev, inst, args):
    res = _permute(ev, inst, args[0])
    out = [args[0], res]
    for ts in inst.shape.tuple_shapes[2:]:
        out.append(np.zeros(dims_of(ts), dtype_of(ts)))
    return tuple(out)


@handler("async_done")
def h_async_done(ev, inst, args):
    """all-gather-done / collective-permute-done: the result of the -start tuple."""
    v = args[0]
    return v[1] if isinstance(v, tuple) else v
