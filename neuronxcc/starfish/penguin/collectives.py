"""Collectives and device ids in Penguin: HLO -> Penguin ops, and Penguin -> BIR.

HLO side (``convert``, called by hlo2penguin for ``HLO_OPCODES``): every
collective becomes one Penguin op per operand with its groups resolved to
global rank ids (``neuronxcc.collectives.groups``, the module's rank count):

  all-reduce(-start)        all_reduce      {reduce, groups}
  all-gather(-start)        all_gather      {dimension, groups}
  reduce-scatter            reduce_scatter  {dimension, reduce, groups}
  all-to-all (array form)   all_to_all      {dimension, groups}
  collective-permute(-start) collective_permute {pairs}
  replica-id / partition-id rank_id         {which: 0 | 1}

-done forms take the result of their -start (no op). The tuple form of
all-to-all and the in-place collective-permute are refused by name.

BIR side (``CollectiveMixin``, part of the codegen kernel set): the operand is
an HBM view (materialised when it is lazy or a broadcast), the result a fresh
HBM tensor (or the output), and one ``collective`` instruction on the
collective engine (SP issues it on queue ``qCollective``) moves the data; the
gathered / scattered / exchanged axis becomes the outermost dimension of the
access pattern on that side, so the instruction's blocks are row-major
(``birpy.opcodes``). ``rank_id`` is a view of the const int32[2] tensor
``rank_id`` ([replica id, partition id]) that the runtime (birsim) writes per
rank (module attrs ``rank_id_tensor``, ``rank_space``).
"""
import numpy as np

from neuronxcc.collectives import groups as _g
from neuronxcc.starfish.penguin.hloinst import called as _called, penguin_dtype, reducer_kind, unsupported

__all__ = ["HLO_OPCODES", "convert", "CollectiveMixin", "PENGUIN_KINDS"]

HLO_OPCODES = frozenset(("all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
                         "all-gather-done", "reduce-scatter", "all-to-all", "collective-permute",
                         "collective-permute-start", "collective-permute-done", "replica-id", "partition-id"))
PENGUIN_KINDS = frozenset(("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
                           "rank_id"))

# hlo2penguin reducer kinds -> BIR collective reduce ops (ints / floats; bools take the logical ones)
_REDUCE = {"add": "add", "max": "max", "min": "min", "mul": "mult", "and": "bitwise_and", "or": "bitwise_or"}
_REDUCE_BOOL = {"and": "logical_and", "or": "logical_or", "max": "logical_or", "min": "logical_and",
                "add": "logical_or", "mul": "logical_and"}
RANK_ID_TENSOR = "rank_id"


def rank_space_of(module):
    from neuronxcc.hlo.ranks import rank_space
    return rank_space(module)


def _flat(ins):
    out = []
    for x in ins:
        if isinstance(x, list):
            out.extend(_flat(x))
        elif x is not None:
            out.append(x)
    return out


def convert(conv, g, inst, ins, loc):
    """The Penguin value(s) of collective / device-id instruction INST (hlo2penguin)."""
    op = inst.opcode
    if op == "all-reduce-done":
        return ins[0]
    if op in ("all-gather-done", "collective-permute-done"):
        return ins[0][1]
    if op in ("replica-id", "partition-id"):
        return g.add_op("rank_id", [], [(inst.name, (), penguin_dtype(inst.shape))],
                        {"which": 0 if op == "replica-id" else 1}, loc)[0]
    space = conv_space(conv)
    where = "%s %s" % (op, inst.name)
    operands = _flat(ins)
    shapes = list(inst.shape.tuple_shapes) if inst.shape.is_tuple else [inst.shape]
    if op in ("all-gather-start", "collective-permute-start"):
        res_shape = shapes[1] if len(shapes) > 1 else shapes[0]
        if res_shape.is_tuple:
            raise unsupported(inst, "several operands in one %s" % op)
        shapes = [res_shape]
        operands = operands[:1]
    if len(shapes) != len(operands):
        raise unsupported(inst, "%d operands for %d results" % (len(operands), len(shapes)))
    attrs = {}
    if op.startswith("collective-permute"):
        if len(inst.operands) != 1:
            raise unsupported(inst, "the in-place form (%d operands)" % len(inst.operands))
        mode = _g.group_mode(op, inst.attrs.get("channel_id"), None, where)
        attrs["pairs"] = [list(p) for p in _g.permute_pairs(mode, inst.attrs.get("source_target_pairs") or (),
                                                             space, where)]
        kind = "collective_permute"
    else:
        mode = _g.group_mode(op, inst.attrs.get("channel_id"), bool(inst.attrs.get("use_global_device_ids")), where)
        attrs["groups"] = [list(x) for x in _g.participant_groups(mode, inst.attrs.get("replica_groups"), space,
                                                                   where)]
        if op in ("all-reduce", "all-reduce-start", "reduce-scatter"):
            rk = reducer_kind(_called(inst))
            if rk not in _REDUCE:
                raise unsupported(inst, "reducer %r (add, maximum, minimum, multiply, and, or are lowered)" % rk)
            attrs["reducer"] = rk
        if op in ("all-gather", "all-gather-start", "reduce-scatter", "all-to-all"):
            dims = [int(d) for d in (inst.attrs.get("dimensions") or ())]
            if not dims:
                raise unsupported(inst, "the tuple form of all-to-all")
            attrs["dimension"] = dims[0]
        kind = {"all-reduce": "all_reduce", "all-reduce-start": "all_reduce", "all-gather": "all_gather",
                "all-gather-start": "all_gather", "reduce-scatter": "reduce_scatter",
                "all-to-all": "all_to_all"}[op]
    vals = []
    for k, (x, s) in enumerate(zip(operands, shapes)):
        name = inst.name if len(shapes) == 1 else "%s.%d" % (inst.name, k)
        vals.append(g.add_op(kind, [x], [(name, tuple(s.dims), penguin_dtype(s))], dict(attrs), loc)[0])
    if op in ("all-gather-start", "collective-permute-start"):
        return [operands[0], vals[0]] + [None] * (len(inst.shape.tuple_shapes) - 2)
    if inst.shape.is_tuple:
        return vals
    return vals[0]


def conv_space(conv):
    sp = getattr(conv, "_rank_space", None)
    if sp is None:
        sp = conv._rank_space = rank_space_of(conv.module)
    return sp


class CollectiveMixin:
    """Codegen kernels of the collective Penguin ops (see the module docstring)."""

    def _cc_operand(self, x):
        from neuronxcc.starfish.penguin.views import View
        if isinstance(x, View) and not x.base.startswith("__") and all(s != 0 for s, n in zip(x.strides, x.shape)
                                                                        if n > 1):
            return x
        return self.cg.materialise(x, allow_views=False)

    def _cc_ap(self, v):
        pat = [[int(s), int(n)] for s, n in zip(v.strides, v.shape)] or [[1, 1]]
        return self.em.hbm(v.base, v.offset, pat)

    @staticmethod
    def _blocks_first(v, d, n):
        """V with axis d split into (n, size/n) and the n blocks moved outermost."""
        s = v.split_axis(d, v.shape[d] // n)
        perm = [d] + [i for i in range(len(s.shape)) if i != d]
        return s.transpose(perm)

    def _cc_emit(self, op, kind, src, dst, **attrs):
        self.cg.m.attrs["collectives"] = self.cg.m.attrs.get("collectives", 0) + 1
        cid = self.cg.m.attrs["collectives"] - 1
        self.em.inst("collective", "SP", [self._cc_ap(dst)], [self._cc_ap(src)], queue="qCollective", op=kind,
                     collective_id=cid, **attrs)

    def _cc_reduce(self, op, dtype):
        rk = op.attrs["reducer"]
        return (_REDUCE_BOOL if dtype == "bool" else _REDUCE)[rk]

    def _cc_group_size(self, op):
        return len(op.attrs["groups"][0])

    def op_all_reduce(self, op, args, outs):
        x = self._cc_operand(args[0])
        out = self.cg.target_for(outs[0].name)
        self._cc_emit(op, "all_reduce", x, out, reduce=self._cc_reduce(op, outs[0].dtype), groups=op.attrs["groups"])
        return [out]

    def op_all_gather(self, op, args, outs):
        x = self._cc_operand(args[0])
        out = self.cg.target_for(outs[0].name)
        n = self._cc_group_size(op)
        self._cc_emit(op, "all_gather", x, self._blocks_first(out, op.attrs["dimension"], n), groups=op.attrs["groups"])
        return [out]

    def op_reduce_scatter(self, op, args, outs):
        x = self._cc_operand(args[0])
        out = self.cg.target_for(outs[0].name)
        n = self._cc_group_size(op)
        self._cc_emit(op, "reduce_scatter", self._blocks_first(x, op.attrs["dimension"], n), out,
                      reduce=self._cc_reduce(op, outs[0].dtype), groups=op.attrs["groups"])
        return [out]

    def op_all_to_all(self, op, args, outs):
        x = self._cc_operand(args[0])
        out = self.cg.target_for(outs[0].name)
        n = self._cc_group_size(op)
        d = op.attrs["dimension"]
        self._cc_emit(op, "all_to_all", self._blocks_first(x, d, n), self._blocks_first(out, d, n),
                      groups=op.attrs["groups"])
        return [out]

    def op_collective_permute(self, op, args, outs):
        x = self._cc_operand(args[0])
        out = self.cg.target_for(outs[0].name)
        self._cc_emit(op, "permute", x, out, pairs=op.attrs["pairs"])
        return [out]

    def op_rank_id(self, op, args, outs):
        from neuronxcc.starfish.penguin.views import View
        m = self.cg.m
        if RANK_ID_TENSOR not in m.tensors:
            self.em.tensor(RANK_ID_TENSOR, "const", "uint32", (2,), data=np.zeros(2, np.uint32), exact_name=True)
            m.attrs["rank_id_tensor"] = RANK_ID_TENSOR
        v = View(RANK_ID_TENSOR, "uint32", (), (), int(op.attrs["which"]))
        return [v if outs[0].dtype == "uint32" else v.with_dtype(outs[0].dtype)]
