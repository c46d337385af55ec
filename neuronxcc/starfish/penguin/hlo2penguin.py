"""hlo2penguin: HLO module -> Penguin IR file (the HLOToTensorizer tool).

    hlo2penguin MODEL --output penguin.json [--target trn1] [--options '...']

What it does, in order:
  * reads MODEL with ``neuronxcc.hlo.load_module`` (any form it accepts);
  * walks the entry computation, inlining ``call``s and ``fusion``s, flattening tuples
    (``tuple`` / ``get-tuple-element`` disappear; tuple parameters and
    results become several inputs / outputs), converting nested regions of
    ``while`` / ``conditional`` into Penguin sub-graphs;
  * folds cheap constants (splat broadcasts stay splats, small constant
    expressions are evaluated with numpy);
  * annotates every value with shape and dtype, every op with its HLO
    instruction name and source ``file:line`` (``Op.loc``);
  * turns an NKI kernel custom-call (AwsNeuronCustomNativeKernel) into one ``nki_kernel`` op carrying
    the kernel's BIR (decoded and checked by ``neuronxcc.hlo.nki_call``; see penguin/nki_splice.py);
  * refuses an op outside the one op table (``neuronxcc.hlo.ops.check_supported``:
    ``[NCC_EVRF001]``, ``[NCC_EVRF015]`` for a custom-call target), an op of
    the table this lowering does not convert (the table's ``NOT_LOWERED``; the
    rest of the table is ``LOWERED_OPCODES``, what list-operators prints) and a
    result whose element type the device cannot hold (``NOT_LOWERED_TYPES``:
    complex) with UnsupportedOperatorError naming the op, the instruction and
    the source location; a program whose tensors cannot fit the target's HBM
    with TensorTooLargeError;
  * expands batch-norm-* (batchnorm.py) and applies ``map`` computations
    elementwise (apply.py); scalar operands of elementwise ops (clamp's bounds,
    select's predicate) become broadcasts.

Exit status: 0 on success, 70 on a compile error (one ``[NCC_...]`` line on
stderr, the traceback goes to the log only).
"""
import logging
import sys

import numpy as np

from neuronxcc.common.toolshell import ToolParser, atomic_output, run_main
from neuronxcc.errors import CompilerError, InternalCompilerError, TensorTooLargeError, location
from neuronxcc.hlo import ops as hlo_ops
from neuronxcc.starfish.penguin import collectives as _collectives
from neuronxcc.starfish.penguin import bits, empty, intbits, ir, linalg
from neuronxcc.starfish.penguin.hloinst import (HLO_TO_DTYPE, NARROW_STORAGE, attr as _attr,  # noqa: F401
                                                called as _called, ints as _ints, loc as _loc, penguin_dtype,
                                                reducer_kind, unsupported)

log = logging.getLogger("neuronxcc.penguin.hlo2penguin")

NARROW_INT = bits.NARROW_INT
# ops that only move narrow values (no wrap needed after them)
_MOVES = frozenset(["parameter", "constant", "broadcast", "reshape", "bitcast", "transpose", "slice", "reverse",
                    "concatenate", "pad", "copy", "dynamic-slice", "dynamic-update-slice", "gather", "select",
                    "tuple", "get-tuple-element", "call", "fusion", "while", "conditional", "sort",
                    "opt-barrier", "optimization-barrier", "after-all", "add-dependency", "custom-call", "iota",
                    "maximum", "minimum", "clamp", "abs", "compare"])
# Element types the interpreter knows and the device cannot hold, with the reason the refusal names.
NOT_LOWERED_TYPES = {"c64": "complex numbers have no on-chip dtype",
                     "c128": "complex numbers have no on-chip dtype"}

# Opcodes of the one op table (``neuronxcc.hlo.ops``: what the interpreter runs) that this lowering does
# not convert, each with the reason it names; the table owns the list (list-operators prints the rest).
NOT_LOWERED = hlo_ops.NOT_LOWERED
# What this tool converts: the table's opcodes minus NOT_LOWERED (elementwise ops keep their HLO spelling).
LOWERED_OPCODES = frozenset(op for op in hlo_ops.OPS if op not in NOT_LOWERED)
# custom-call targets it converts, by the table's interpreter handler -> the Penguin op kind.
CUSTOM_CALL_KINDS = {"custom_topk": "topk", "custom_nki_kernel": "nki_kernel", "custom_identity": "identity"}
LOWERED_CUSTOM_CALLS = {t.lower(): CUSTOM_CALL_KINDS[h] for t, h in hlo_ops.CUSTOM_CALL_TARGETS.items()
                        if h in CUSTOM_CALL_KINDS}

FOLD_LIMIT = 4096          # fold constant expressions up to this many elements


def nki_kernel_attrs(inst):
    """Penguin attrs of an NKI kernel custom-call: its BIR and the binding of operands / results
    (decoded and checked here, so an unreadable backend_config fails naming the instruction)."""
    from neuronxcc.hlo import nki_call
    call = nki_call.kernel_call_of(inst)
    return {"func_name": call.func_name, "input_names": call.input_names, "output_names": call.output_names,
            "aliases": sorted([k, v] for k, v in call.aliases.items()), "bir": call.bir_json}


class Converter:
    """Builds one Penguin Graph from one HLO computation."""

    def __init__(self, module):
        self.module = module

    # -- public ---------------------------------------------------------------
    def convert_entry(self):
        comp = self.module.entry
        g = ir.Graph(getattr(self.module, "name", "main"))
        env = {}
        for p in comp.parameters:
            env[id(p)] = self._new_inputs(g, p.name, p.shape)
        self._convert_body(g, comp, env)
        g.outputs = self._flatten(env[id(comp.root)])
        g.outputs = self._materialise_outputs(g, g.outputs)
        names = [p.frontend_attributes.get("neff_input_names") for p in comp.parameters
                 if not p.shape.is_tuple]
        if names and all(names) and len(names) == len(g.inputs):
            g.attrs["input_names"] = names
        out_names = (getattr(self.module, "frontend_attributes", None) or {}).get("neff_output_names") or \
            (getattr(comp.root, "frontend_attributes", None) or {}).get("neff_output_names")
        if out_names:
            g.attrs["output_names"] = out_names
        space = _collectives.conv_space(self)
        if space.size > 1:
            g.attrs["rank_space"] = [space.num_replicas, space.num_partitions]
        g.dce()
        g.verify()
        return g

    def convert_region(self, comp, name):
        """A nested computation as a sub-graph: inputs are its flattened params."""
        g = ir.Graph(name)
        env = {}
        for p in comp.parameters:
            env[id(p)] = self._new_inputs(g, p.name, p.shape)
        self._convert_body(g, comp, env)
        g.outputs = self._materialise_outputs(g, self._flatten(env[id(comp.root)]))
        g.dce()
        g.verify()
        return g

    # -- helpers ---------------------------------------------------------------
    def _new_inputs(self, g, name, shape):
        if shape.element_type == "tuple":
            return [self._new_inputs(g, "%s.%d" % (name, k), s) for k, s in enumerate(shape.tuple_shapes)]
        if shape.element_type == "token":
            return None
        return g.add_input(name, shape.dims, penguin_dtype(shape))

    def _flatten(self, x):
        if x is None:
            return []
        if isinstance(x, list):
            out = []
            for e in x:
                out.extend(self._flatten(e))
            return out
        return [x]

    def _materialise_outputs(self, g, outs):
        """Outputs must be distinct non-input values: copy duplicates and pass-throughs."""
        seen, res = set(), []
        for o in outs:
            if o in seen or o in g.inputs:
                v = g.values[o]
                o = g.add_op("copy", [o], [(o + ".out", v.shape, v.dtype)], loc={"hlo": o})[0]
            seen.add(o)
            res.append(o)
        return res

    def _convert_body(self, g, comp, env):
        for inst in comp.instructions:
            if inst.opcode == "parameter":
                continue
            if inst.opcode not in LOWERED_OPCODES:
                raise unsupported(inst, NOT_LOWERED.get(inst.opcode))
            try:
                env[id(inst)] = self._convert(g, inst, env)
                if inst.shape.is_array and inst.shape.element_type in NARROW_INT and inst.opcode not in _MOVES:
                    env[id(inst)] = bits.wrap_narrow(g, inst, env[id(inst)])
            except CompilerError:
                raise
            except Exception as e:  # a bug here must still name the instruction
                log.exception("hlo2penguin failed on %s", inst.name)
                raise InternalCompilerError("hlo2penguin failed on %s: %s" % (location(inst.name, source=getattr(inst, "metadata", None)), e))

    def _convert(self, g, inst, env):
        op = inst.opcode
        ins = [env[id(o)] for o in inst.operands]
        loc = _loc(inst)
        if op in ("tuple",):
            return list(ins)
        if op == "get-tuple-element":
            from neuronxcc.hlo import interp_attrs as A
            idx = A.int_attr(inst, "index")
            return ins[0][A.int_attr(inst, "tuple_index", 0) if idx is None else idx]
        settled = empty.settle(self, g, inst, ins, loc)
        if settled is not None:
            return settled
        if op in linalg.OPS:
            return linalg.lower(self, g, inst, ins, loc)
        if op == "reduce-precision":
            return self.reduce_precision_value(g, inst, ins[0], loc, inst.name)
        if op in ("opt-barrier", "optimization-barrier", "add-dependency"):
            return ins[0]
        if op == "custom-call" and self._kind(inst) == "identity":     # a partitioning annotation
            if len(ins) != 1 or tuple(g.values[ins[0]].shape) != tuple(inst.shape.dims):
                raise unsupported(inst, "custom-call %r changes the shape (a shard of its own; this compiler runs "
                                        "the whole program on one NeuronCore)" % _attr(inst, "custom_call_target"))
            return ins[0]
        if op == "after-all":
            return None
        if op in _collectives.HLO_OPCODES:
            return _collectives.convert(self, g, inst, ins, loc)
        if op in ("call", "fusion"):
            # inlined: a fused computation is an ordinary computation of the module
            callee = inst.called_computations[0] if inst.called_computations else \
                _attr(inst, "to_apply", "calls")
            sub = {}
            for p in callee.parameters:
                sub[id(p)] = ins[p.parameter_number]
            self._convert_body(g, callee, sub)
            return sub[id(callee.root)]
        if op == "map":
            from neuronxcc.starfish.penguin.apply import apply_computation
            dims = tuple(inst.shape.dims)
            return apply_computation(self, g, _called(inst), ins, dims, loc, inst.name)[0]
        if op == "rng-bit-generator":
            from neuronxcc.starfish.penguin import rng
            return rng.lower(self, g, inst, env, loc)
        if op == "bitcast-convert" and inst.shape.is_array and \
                ir.dtype_size(penguin_dtype(inst.shape)) != ir.dtype_size(penguin_dtype(inst.operands[0].shape)):
            return bits.bitcast_convert_width(g, inst, ins[0], loc)
        if op == "convert" and inst.shape.element_type in NARROW_INT and \
                not inst.operands[0].shape.element_type in NARROW_INT:
            return bits.convert_to_narrow(g, inst, ins[0], loc)
        if op == "bitcast" and inst.shape.is_array:
            return bits.bitcast(g, inst, ins[0], loc)
        if op in ("reduce", "reduce-window", "select-and-scatter"):
            res = self._convert_reduction(g, inst, ins, loc)
            if res is not None:
                return res
        if op == "scatter":
            from neuronxcc.starfish.penguin import scattersplit
            res = scattersplit.split(self, g, inst, ins, loc)
            if res is not None:
                return res
        if op == "dot":
            from neuronxcc.starfish.penguin import intdot
            res = intdot.lower(g, inst, ins, loc)
            if res is not None:
                return res
        if op in ("acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh"):
            from neuronxcc.starfish.penguin import trig
            return trig.lower(g, inst, ins[0], loc)
        if op.startswith("batch-norm-"):
            from neuronxcc.starfish.penguin.batchnorm import LOWERINGS
            return LOWERINGS[op](g, inst, ins, loc)
        if op in ir.ELEMENTWISE and inst.shape.is_array and inst.shape.dims:
            ins = self._broadcast_scalars(g, inst, ins, loc)
        if op == "compare" and inst.operands[0].shape.is_array:
            res = intbits.total_order_compare(g, inst, ins, loc)
            if res is not None:
                return res
        if op in intbits.OPS or op in intbits.COUNTS:
            res = intbits.lower(self, g, inst, ins, loc) if op in intbits.OPS else \
                intbits.lower_count(g, inst, ins, loc)
            if res is not None:
                return res
        shape = inst.shape
        if shape.element_type == "tuple":
            return self._convert_multi(g, inst, ins, loc)
        dtype = penguin_dtype(shape)
        dims = tuple(shape.dims)
        if op == "constant":
            return self._constant(g, inst.name, np.asarray(inst.literal), dims, dtype, loc)
        folded = self._try_fold(g, inst, ins, dims, dtype, loc)
        if folded is not None:
            return folded
        attrs = self._attrs(g, inst)
        if op == "conditional":      # tuple branch operands: flattened, as the branch regions' inputs are
            ins = self._flatten(ins)
        return g.add_op(self._kind(inst), ins, [(inst.name, dims, dtype)], attrs, loc)[0]

    def _convert_reduction(self, g, inst, ins, loc):
        """A reduction the kernels do not run as it is, lowered by its computation (reductions.py)."""
        from neuronxcc.starfish.penguin import reductions as red
        if inst.opcode == "select-and-scatter":
            from neuronxcc.hlo import interp_attrs as A
            w = A.window(inst, len(inst.operands[0].shape.dims))
            if red.is_max_pool_grad(inst) and self._const_of(g, ins[2]) is not None and \
                    not any(w["pad_lo"]) and not any(w["pad_hi"]) and list(w["stride"]) == list(w["size"]) and \
                    red.window_taps(w) <= red.MAX_TAPS:
                return None
            return red.convert_select_and_scatter(self, g, inst, ins, loc)
        kind = self.reducer_kind(_called(inst))
        if inst.opcode == "reduce":
            return red.convert_reduce(self, g, inst, ins, loc, kind)
        return red.convert_reduce_window(self, g, inst, ins, loc, kind)

    def reducer_kind(self, comp):
        """reducer_kind, with boolean reducers classified by their truth table."""
        kind = reducer_kind(comp)
        if kind == "other" and comp is not None:
            from neuronxcc.starfish.penguin.reductions import bool_kind
            kind = bool_kind(self.module, comp) or kind
        return kind

    def _broadcast_scalars(self, g, inst, ins, loc):
        """Scalar operands of an elementwise op (clamp's bounds, select's predicate) broadcast to its shape."""
        dims = tuple(inst.shape.dims)
        out = []
        for o, x in zip(inst.operands, ins):
            if isinstance(x, str) and not o.shape.dims and dims:
                x = g.add_op("broadcast", [x], [(inst.name + ".bcast", dims, g.values[x].dtype)],
                             {"dimensions": []}, loc)[0]
            out.append(x)
        return out

    def elementwise_attrs(self, inst):
        """The Penguin attributes of an elementwise instruction (compare's direction and type)."""
        return self._attrs(None, inst) if inst.opcode == "compare" else {}

    def reduce_precision_value(self, g, inst, x, loc, name):
        """reduce-precision to (5, 10) / (8, 7) bits = a round trip through float16 / bfloat16."""
        from neuronxcc.hlo import interp_attrs as A
        e, m = A.int_attr(inst, "exponent_bits"), A.int_attr(inst, "mantissa_bits")
        v = g.values[x]
        narrow = {(5, 10): "float16", (8, 7): "bfloat16", (8, 23): None}.get((e, m), "?")
        if narrow is None or v.dtype == narrow:
            return x
        if narrow == "?":
            return bits.reduce_precision_bits(g, x, e, m, loc, name)
        sh, dt = v.shape, v.dtype
        t = g.add_op("convert", [x], [(name + ".narrow", sh, narrow)], {}, loc)[0]
        y = g.add_op("convert", [t], [(name + ".wide", sh, dt)], {}, loc)[0]
        # XLA flushes results below the narrow type's smallest normal to (signed) zero
        tiny = g.add_op("constant", [], [(name + ".tiny", sh, dt)],
                        {"value": 2.0 ** -14 if narrow == "float16" else 2.0 ** -126}, loc)[0]
        zero = g.add_op("constant", [], [(name + ".zero", sh, dt)], {"value": 0.0}, loc)[0]
        ay = g.add_op("abs", [y], [(name + ".abs", sh, dt)], {}, loc)[0]
        small = g.add_op("compare", [ay, tiny], [(name + ".small", sh, "bool")], {"direction": "LT"}, loc)[0]
        z = g.add_op("multiply", [y, zero], [(name + ".z", sh, dt)], {}, loc)[0]
        return g.add_op("select", [small, z, y], [(name, sh, dt)], {}, loc)[0]

    def _kind(self, inst):
        op = inst.opcode
        if op == "custom-call":
            tgt = str(_attr(inst, "custom_call_target", default="")).lower()
            if tgt in LOWERED_CUSTOM_CALLS:
                return LOWERED_CUSTOM_CALLS[tgt]
            raise unsupported(inst, "custom-call target %r" % tgt)
        if op == "bitcast":
            return "reshape"
        return op

    def _attrs(self, g, inst):
        from neuronxcc.hlo import interp_attrs as A
        op = inst.opcode
        rank = len(inst.operands[0].shape.dims) if inst.operands and inst.operands[0].shape.is_array else 0
        a = {}
        if op == "broadcast":
            a["dimensions"] = A.int_list(inst, "dimensions")
        elif op == "transpose":
            a["permutation"] = A.int_list(inst, "dimensions")
        elif op == "reverse":
            a["dimensions"] = A.int_list(inst, "dimensions")
        elif op == "slice":
            st, li, sd = A.slice_spec(inst, rank)
            a.update(starts=list(st), limits=list(li), strides=list(sd))
        elif op == "concatenate":
            a["dimension"] = A.int_list(inst, "dimensions")[0]
        elif op == "iota":
            a["dimension"] = A.int_attr(inst, "iota_dimension", 0)
        elif op == "compare":
            a["direction"] = (A.str_attr(inst, "direction") or A.str_attr(inst, "comparison_direction")).upper()
            a["type"] = A.str_attr(inst, "type") or ""
        elif op == "dot":
            a.update({k: list(v) for k, v in A.dot_dims(inst).items()})
        elif op == "reduce":
            a["dimensions"] = A.int_list(inst, "dimensions")
            a["reducer"] = self.reducer_kind(_called(inst))
        elif op == "pad":
            a["padding"] = [list(p) for p in A.padding_config(inst, rank)]
        elif op == "dynamic-slice":
            a["sizes"] = A.int_list(inst, "dynamic_slice_sizes")
        elif op == "sort":
            a["dimension"] = A.int_list(inst, "dimensions")[0]
            a["descending"] = _sort_descending(_called(inst))
            a["num_keys"] = _sort_num_keys(_called(inst))
            a["key_descending"] = _sort_key_directions(_called(inst), a["num_keys"], a["descending"])
            a["stable"] = A.bool_attr(inst, "is_stable", False)
        elif op == "topk":
            a["k"] = A.int_attr(inst, "k")
            a["largest"] = A.bool_attr(inst, "largest", True)
        elif op == "custom-call" and self._kind(inst) == "topk":
            # TopK custom-call: k is the last dim of the values result; always the largest
            a["k"] = int(inst.shape.tuple_shapes[0].dims[-1])
            a["largest"] = True
        elif op == "custom-call" and self._kind(inst) == "nki_kernel":
            a.update(nki_kernel_attrs(inst))
        elif op == "reduce-window":
            a["window"] = A.window(inst, rank)
            a["reducer"] = self.reducer_kind(_called(inst))
        elif op == "select-and-scatter":
            a["window"] = A.window(inst, rank)
        elif op == "convolution":
            a["window"] = A.window(inst, len(inst.operands[0].shape.dims) - 2)
            a["dims"] = A.conv_dims(inst, rank)
            a["feature_group_count"] = A.int_attr(inst, "feature_group_count", 1)
            a["batch_group_count"] = A.int_attr(inst, "batch_group_count", 1)
        elif op == "gather":
            a["dims"] = A.gather_dims(inst)
            a["indices_are_sorted"] = A.bool_attr(inst, "indices_are_sorted", False)
        elif op == "scatter":
            a["dims"] = A.scatter_dims(inst)
            a["reducer"] = reducer_kind(_called(inst))
            a["update_kind"] = _scatter_update_kind(_called(inst))
            from neuronxcc.starfish.penguin.reductions import ALU_KINDS   # the scatter kernel's ALU combiners
            nops = len(inst.operands) // 2
            if g is not None and (nops > 1 or a["update_kind"] not in ALU_KINDS and a["update_kind"] != "replace"):
                from neuronxcc.starfish.penguin.apply import applicable
                comb = _called(inst)
                why = applicable(comb)
                if why:
                    raise unsupported(inst, "the scatter combiner %s: %s" % (comb.name, why))
                a["combiner"] = self.convert_region(comb, comb.name)
        elif op == "while":
            cond = inst.attrs["condition"]
            body = inst.attrs["body"]
            a["cond"] = self.convert_region(cond, cond.name)
            a["body"] = self.convert_region(body, body.name)
        elif op == "conditional":
            comps = inst.attrs.get("branch_computations") or inst.called_computations
            a["branches"] = [self.convert_region(c, c.name) for c in comps]
        return a

    def _convert_multi(self, g, inst, ins, loc):
        """Tuple-shaped results: variadic reduce, sort, topk, while, conditional."""
        op = inst.opcode
        specs = []
        for k, s in enumerate(inst.shape.tuple_shapes):
            if s.element_type == "tuple":
                raise unsupported(inst, "nested tuple results")
            specs.append(("%s.%d" % (inst.name, k), tuple(s.dims), penguin_dtype(s)))
        flat_ins = self._flatten(ins)
        attrs = self._attrs(g, inst)
        if op not in ("reduce", "sort", "topk", "custom-call", "while", "conditional", "reduce-window",
                      "scatter"):
            raise unsupported(inst, "tuple-shaped result")
        return g.add_op(self._kind(inst), flat_ins, specs, attrs, loc)

    # -- constants ------------------------------------------------------------
    def _constant(self, g, name, arr, dims, dtype, loc):
        arr = np.asarray(arr).reshape(dims) if arr.size == int(np.prod(dims)) else arr
        flat = arr.reshape(-1)
        if flat.size == 1 or (flat.size > 1 and np.array_equal(flat, np.full_like(flat, flat[0]), equal_nan=True)):
            return g.add_op("constant", [], [(name, dims, dtype)], {"value": _scalar(flat[0])}, loc)[0]
        return g.add_op("constant", [], [(name, dims, dtype)], {"data": arr.astype(ir.np_dtype(dtype))}, loc)[0]

    def _producer(self, g, v):
        """The last op of ``g`` that outputs ``v`` (None if none): an index over the ops,
        extended as ops are appended (a scan of every op per operand was quadratic)."""
        per_graph = self.__dict__.setdefault("_producers", {})
        idx = per_graph.get(id(g))
        if idx is None or idx[0] is not g or idx[1] > len(g.ops) or \
                (idx[1] and g.ops[idx[1] - 1] is not idx[3]):
            idx = [g, 0, {}, None]
            per_graph[id(g)] = idx
        ops = g.ops
        for k in range(idx[1], len(ops)):
            for o in ops[k].outputs:
                idx[2][o] = ops[k]
        idx[1] = len(ops)
        idx[3] = ops[-1] if ops else None
        return idx[2].get(v)

    def _const_of(self, g, v):
        """(kind, payload) for a constant value: ('splat', scalar) / ('data', array) / None."""
        op = self._producer(g, v)
        if op is None or op.kind != "constant":
            return None
        if "value" in op.attrs:
            return ("splat", op.attrs["value"])
        return ("data", op.attrs["data"])

    def _try_fold(self, g, inst, ins, dims, dtype, loc):
        if not inst.operands or any(not isinstance(x, str) for x in ins):
            return None
        consts = [self._const_of(g, v) for v in ins]
        if any(c is None for c in consts):
            return None
        op = inst.opcode
        # splat propagation through views and cheap elementwise ops: no data at all
        if all(c[0] == "splat" for c in consts):
            vals = [c[1] for c in consts]
            if op in ("broadcast", "reshape", "bitcast", "transpose", "copy", "slice", "reverse"):
                return g.add_op("constant", [], [(inst.name, dims, dtype)], {"value": vals[0]}, loc)[0]
        size = int(np.prod(dims)) if dims else 1
        if size > FOLD_LIMIT:
            return None
        arrays = []
        for v, c in zip(ins, consts):
            val = g.values[v]
            if c[0] == "splat":
                arrays.append(np.full(val.shape, c[1], dtype=ir.np_dtype(val.dtype)))
            else:
                arrays.append(np.asarray(c[1]).astype(ir.np_dtype(val.dtype)))
        res = fold_numpy(op, arrays, self._attrs_for_fold(inst), dims, dtype)
        if res is None:
            return None
        return self._constant(g, inst.name, res, dims, dtype, loc)

    def _attrs_for_fold(self, inst):
        op = inst.opcode
        if op in ("broadcast", "transpose", "reverse", "slice", "compare", "concatenate"):
            return self._attrs(None, inst)
        return {}


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def _scatter_update_kind(comp):
    """'replace' when the scatter combiner returns its update operand, else the reducer kind."""
    if comp is None:
        return "other"
    root = comp.root
    params = list(comp.parameters)
    if root.opcode == "parameter" and len(params) == 2 and root is params[1]:
        return "replace"
    return reducer_kind(comp)


def _sort_num_keys(comp):
    """How many leading operands the comparator reads (params 2k, 2k+1 belong to operand k)."""
    if comp is None:
        return 1
    used = [p.parameter_number // 2 for p in comp.parameters
            if any(p in i.operands for i in comp.instructions if i.opcode != "parameter")]
    return max(used) + 1 if used else 1


def _sort_key_directions(comp, nk, default):
    """Per key of a sort comparator, whether it orders that key descending (None: no ordering
    compare of it found): from each GT / GE / LT / LE compare of the key's two parameters (through
    unary ops: JAX's total-order keys are bitcasts of them), swapped when the second comes first."""
    dirs = [None] * nk
    if comp is None:
        return [default] * nk

    def param(x):
        while x.opcode != "parameter" and len(x.operands) == 1:
            x = x.operands[0]
        return x if x.opcode == "parameter" else None
    for i in comp.instructions:
        if i.opcode != "compare" or len(i.operands) != 2:
            continue
        d = str(_attr(i, "direction", "comparison_direction")).upper()
        a, b = (param(o) for o in i.operands)
        if d not in ("GT", "GE", "LT", "LE") or a is None or b is None or \
                a.parameter_number // 2 != b.parameter_number // 2 or a.parameter_number == b.parameter_number:
            continue
        k = a.parameter_number // 2
        if k < nk:
            desc = (d in ("GT", "GE")) != (a.parameter_number % 2 == 1)
            dirs[k] = desc if dirs[k] is None or dirs[k] == desc else "mixed"
    return dirs


def _sort_descending(comp):
    if comp is None:
        return False
    for i in comp.instructions:
        if i.opcode == "compare":
            d = str(_attr(i, "direction", "comparison_direction")).upper()
            ops = i.operands
            swapped = ops and ops[0].opcode == "parameter" and ops[0].parameter_number % 2 == 1
            if d in ("GT", "GE"):
                return not swapped
            if d in ("LT", "LE"):
                return bool(swapped)
    return False


def _scalar(x):
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return bool(x)
    if x.dtype.kind in "iu":
        return int(x)
    return float(x.astype(np.float64))


_NP_UNARY = {"abs": np.abs, "negate": np.negative, "exponential": np.exp, "log": np.log, "tanh": np.tanh,
             "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "not": None,
             "copy": lambda x: x}
_NP_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
              "minimum": np.minimum, "and": None, "or": None}


def fold_numpy(op, arrays, attrs, dims, dtype):
    """Evaluate a cheap op on constant arrays, or None when not foldable here."""
    nd = ir.np_dtype(dtype)
    with np.errstate(all="ignore"):
        if op in ("reshape", "bitcast") and arrays[0].size == int(np.prod(dims)):
            return arrays[0].reshape(dims).astype(nd)
        if op == "broadcast":
            src = arrays[0]
            shape = [1] * len(dims)
            for k, d in enumerate(attrs["dimensions"]):
                shape[d] = src.shape[k]
            return np.broadcast_to(src.reshape(shape), dims).astype(nd)
        if op == "transpose":
            return np.transpose(arrays[0], attrs["permutation"]).astype(nd)
        if op == "convert":
            return arrays[0].astype(nd)
        if op == "slice":
            sl = tuple(slice(s, l, t) for s, l, t in zip(attrs["starts"], attrs["limits"], attrs["strides"]))
            return arrays[0][sl].astype(nd)
        if op == "reverse":
            return np.flip(arrays[0], axis=tuple(attrs["dimensions"])).astype(nd)
        if op == "concatenate":
            return np.concatenate(arrays, axis=attrs["dimension"]).astype(nd)
        if op in _NP_UNARY and _NP_UNARY[op] is not None and arrays[0].dtype.kind == "f":
            return _NP_UNARY[op](arrays[0].astype(np.float32)).astype(nd)
        if op in _NP_BINARY and _NP_BINARY[op] is not None and arrays[0].dtype.kind in "fiu":
            return _NP_BINARY[op](arrays[0], arrays[1]).astype(nd)
    return None


def check_hbm(graph, target):
    """TensorTooLargeError when the program's tensors cannot fit the target's HBM."""
    from neuronxcc.hwm import get_target
    tm = get_target(target)
    total = 0
    for v in graph.values.values():
        if v.nbytes > tm.hbm_bytes_per_core:
            raise TensorTooLargeError("Tensor %s (%s%s, %d bytes) exceeds the %s HBM of %d bytes per NeuronCore"
                                      % (v.name, v.dtype, list(v.shape), v.nbytes, tm.name,
                                         tm.hbm_bytes_per_core))
    for n in list(graph.inputs) + list(graph.outputs):
        total += graph.values[n].nbytes
    if total > tm.hbm_bytes_per_core:
        raise TensorTooLargeError("The program's inputs and outputs need %d bytes, more than the %s HBM of %d "
                                  "bytes per NeuronCore" % (total, tm.name, tm.hbm_bytes_per_core))


def check_element_types(module):
    """UnsupportedOperatorError naming the first instruction whose result has an element type
    the lowering cannot hold (complex, ...), before any conversion starts."""
    for comp in hlo_ops.module_computations(module):
        for inst in comp.instructions:
            for et in _leaf_types(inst.shape):
                if et not in HLO_TO_DTYPE and et not in NARROW_STORAGE and et not in ("token", "opaque"):
                    why = NOT_LOWERED_TYPES.get(et, "element type %s has no on-chip dtype" % et)
                    raise unsupported(inst, "its result has element type %s: %s; supported element types: %s"
                                      % (et, why, ", ".join(list(HLO_TO_DTYPE) + [t for t in NARROW_STORAGE
                                                                                 if t not in HLO_TO_DTYPE])))


def _leaf_types(shape):
    if shape.element_type == "tuple":
        for s in shape.tuple_shapes:
            yield from _leaf_types(s)
    else:
        yield shape.element_type


def hlo_to_penguin(module, target="trn1"):
    """The library entry: an HloModule -> a verified Penguin Graph."""
    hlo_ops.check_supported(module)
    check_element_types(module)
    g = Converter(module).convert_entry()
    check_hbm(g, target)
    return g


def _main(argv):
    ap = ToolParser(prog="hlo2penguin", description="Lower an HLO module to a Penguin IR file.")
    ap.add_argument("model", help="HLO module (HloModuleProto, HloProto, HLO text or model directory)")
    ap.add_argument("--output", "-o", default="penguin.json")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--options", default="", help="hlo2tensorizer options (accepted, recorded)")
    args = ap.parse_args(argv)
    from neuronxcc.hlo import load_module
    module = load_module(args.model)
    g = hlo_to_penguin(module, args.target)
    g.attrs["target"] = args.target
    g.attrs["options"] = args.options
    with atomic_output(args.output) as tmp:
        ir.save(g, tmp)
    return 0


def main(argv=None):
    return run_main("hlo2penguin", _main, argv, log, prefix=False)


if __name__ == "__main__":
    sys.exit(main())
