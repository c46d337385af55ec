"""Attribute values of the HLO text reader: one parser per attribute form.

``parse_attr(sc, key, start, end, comp_ref)`` turns the raw text of
``key=value`` into the model's value (see model.py for the shapes of the
values): int lists, slices, padding, windows, dim_labels, precision lists,
metadata, frontend attributes, replica groups (explicit and iota form),
layout constraints, aliasing, computation references. An unknown attribute
name is an error, as in XLA's own parser.
"""
import re

import numpy as np

from neuronxcc.hlo.model import ConvDims, WindowDim
from neuronxcc.hlo.text_scan import SubScanner, skip_balanced, parse_shape

# attribute name -> kind
_INT_LIST_ATTRS = frozenset((
    "dimensions", "slice_sizes", "dynamic_slice_sizes", "lhs_contracting_dims", "rhs_contracting_dims",
    "lhs_batch_dims", "rhs_batch_dims", "offset_dims", "collapsed_slice_dims", "start_index_map",
    "operand_batching_dims", "start_indices_batching_dims", "update_window_dims", "inserted_window_dims",
    "scatter_dims_to_operand_dims", "input_batching_dims", "scatter_indices_batching_dims", "fft_length"))
_INT_ATTRS = frozenset(("index", "iota_dimension", "index_vector_dim", "feature_group_count", "batch_group_count",
                        "exponent_bits", "mantissa_bits", "feature_index", "channel_id", "k", "delta"))
_BOOL_ATTRS = frozenset(("is_stable", "indices_are_sorted", "unique_indices", "custom_call_has_side_effect",
                         "largest", "use_global_device_ids", "constrain_layout", "is_host_transfer", "lower",
                         "left_side", "unit_diagonal"))
_WORD_ATTRS = frozenset(("direction", "type", "api_version", "distribution", "algorithm", "kind", "fft_type",
                         "schedule", "transpose_a"))
_STRING_ATTRS = frozenset(("custom_call_target", "backend_config", "infeed_config", "outfeed_config"))
_COMP_ATTRS = frozenset(("to_apply", "body", "condition", "select", "scatter", "calls", "true_computation",
                         "false_computation"))
_COMP_LIST_ATTRS = frozenset(("branch_computations", "called_computations"))
# attributes read and dropped (no meaning for this compiler, not in our proto subset)
IGNORED_ATTRS = frozenset(("statistics", "origin", "result_accuracy", "is_composite", "composite",
                            "control-predecessors", "domain", "layout", "dynamic_slice_sizes_", "async_group_id",
                            "async_execution_thread", "mode", "algorithm_", "sparsity", "original_value",
                            "parameter_replication"))


def _int_list(sc):
    sc.expect("{", "'{' starting a list")
    vals = []
    if sc.accept("}"):
        return tuple(vals)
    while True:
        vals.append(sc.integer())
        if sc.accept("}"):
            return tuple(vals)
        sc.expect(",", "',' or '}' in a list")


def _int_list_list(sc):
    sc.expect("{", "'{' starting a list of lists")
    out = []
    if sc.accept("}"):
        return tuple(out)
    while True:
        out.append(_int_list(sc))
        if sc.accept("}"):
            return tuple(out)
        sc.expect(",", "',' or '}' in a list of lists")


def _replica_groups(sc):
    sc.skip_ws()
    if sc.peek("["):  # iota form [G,S]<=[N] or [G,S]<=[a,b]T(1,0)
        sc.expect("[")
        gdims = [sc.integer()]
        while sc.accept(","):
            gdims.append(sc.integer())
        sc.expect("]")
        sc.expect("<=")
        sc.expect("[")
        rdims = [sc.integer()]
        while sc.accept(","):
            rdims.append(sc.integer())
        sc.expect("]")
        perm = list(range(len(rdims)))
        if sc.accept("T"):
            sc.expect("(")
            perm = [sc.integer()]
            while sc.accept(","):
                perm.append(sc.integer())
            sc.expect(")")
        total = 1
        for d in rdims:
            total *= d
        if total > 1 << 20 or len(gdims) != 2 or gdims[0] * gdims[1] != total or sorted(perm) != list(range(len(rdims))):
            raise sc.error("bad iota replica groups")
        ids = np.arange(total).reshape(rdims).transpose(perm).reshape(gdims)
        return tuple(tuple(int(x) for x in row) for row in ids)
    return _int_list_list(sc)


def _window(sc, end):
    sc.expect("{", "'{' starting a window")
    fields = {}
    while not sc.accept("}"):
        key = sc.name("a window field")
        sc.expect("=")
        sc.skip_ws()
        m = re.compile(r"[0-9_x\-]+").match(sc.text, sc.pos)
        if not m:
            raise sc.error("bad value for window field %s" % key)
        sc.pos = m.end()
        parts = m.group(0).split("x")
        try:
            if key == "pad":
                vals = []
                for p in parts:
                    lo, hi = re.fullmatch(r"(-?\d+)_(-?\d+)", p).groups()
                    vals.append((int(lo), int(hi)))
            else:
                vals = [int(p) for p in parts]
        except (AttributeError, ValueError):
            raise sc.error("bad value %r for window field %s" % (m.group(0), key)) from None
        if key not in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            raise sc.error("unknown window field %s" % key)
        fields[key] = vals
    n = len(fields.get("size", ()))
    for k, v in fields.items():
        if len(v) != n:
            raise sc.error("window field %s has %d entries, size has %d" % (k, len(v), n))
    return tuple(WindowDim(fields["size"][d], fields.get("stride", [1] * n)[d],
                           fields.get("pad", [(0, 0)] * n)[d][0], fields.get("pad", [(0, 0)] * n)[d][1],
                           fields.get("rhs_dilate", [1] * n)[d], fields.get("lhs_dilate", [1] * n)[d],
                           bool(fields.get("rhs_reversal", [0] * n)[d])) for d in range(n))


def _dim_labels(sc, text):
    m = re.fullmatch(r"([0-9bf]+)_([0-9io]+)->([0-9bf]+)", text.strip())
    if not m:
        raise sc.error("bad dim_labels %r" % text)
    lhs, rhs, out = m.groups()

    def spatial(s):
        ds = sorted((int(ch), k) for k, ch in enumerate(s) if ch.isdigit())
        if [d for d, _ in ds] != list(range(len(ds))):
            raise sc.error("bad spatial dimensions in dim_labels %r" % text)
        return tuple(k for _, k in ds)
    if not (len(lhs) == len(rhs) == len(out)) or any(s.count(c) != 1 for s, cs in ((lhs, "bf"), (rhs, "io"),
                                                                                  (out, "bf")) for c in cs):
        raise sc.error("bad dim_labels %r" % text)
    return ConvDims(lhs.index("b"), lhs.index("f"), spatial(lhs), rhs.index("i"), rhs.index("o"), spatial(rhs),
                    out.index("b"), out.index("f"), spatial(out))


def _padding(sc, text):
    t = text.strip()
    if not t:
        return ()
    out = []
    for p in t.split("x"):
        m = re.fullmatch(r"(-?\d+)_(-?\d+)(?:_(\d+))?", p)
        if not m:
            raise sc.error("bad padding %r" % text)
        out.append((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)))
    return tuple(out)


def _slice(sc):
    sc.expect("{", "'{' starting slice ranges")
    out = []
    if sc.accept("}"):
        return ()
    while True:
        sc.expect("[")
        start = sc.integer()
        sc.expect(":")
        limit = sc.integer()
        stride = sc.integer() if sc.accept(":") else 1
        sc.expect("]")
        out.append((start, limit, stride))
        if sc.accept("}"):
            return tuple(out)
        sc.expect(",", "',' or '}' in slice ranges")


def key_values(sc):
    """{k="v" k2=3, ...} -> dict (values: str for strings, raw text otherwise)."""
    sc.expect("{")
    out = {}
    while not sc.accept("}"):
        key = sc.string() if sc.peek('"') else sc.name("an attribute key")
        sc.expect("=")
        if sc.peek('"'):
            out[key] = sc.string()
        elif sc.peek("{"):
            s, e = skip_balanced(sc)
            out[key] = sc.text[s:e]
        else:
            sc.skip_ws()
            m = re.compile(r"[^\s,}]+").match(sc.text, sc.pos)
            if not m:
                raise sc.error("expected a value for %s" % key)
            sc.pos = m.end()
            out[key] = m.group(0)
        sc.accept(",")
    return out


_METADATA_INT = ("source_line", "source_end_line", "source_column", "source_end_column", "stack_frame_id")


def _metadata(sc):
    kv = key_values(sc)
    md = {}
    for k, v in kv.items():
        if k in _METADATA_INT:
            try:
                md[k] = int(v)
            except ValueError:
                raise sc.error("metadata %s must be an integer" % k) from None
        elif k in ("op_type", "op_name", "source_file", "deduplicated_name", "scheduling_name"):
            md[k] = v
    frame = md.pop("stack_frame_id", None)
    if frame and not md.get("source_file") and frame in sc.frames:
        md["source_file"], md["source_line"] = sc.frames[frame]
    return {k: v for k, v in md.items() if v}


def _shape_list(sc):
    sc.expect("{")
    out = []
    if sc.accept("}"):
        return ()
    while True:
        out.append(parse_shape(sc))
        if sc.accept("}"):
            return tuple(out)
        sc.expect(",")


def parse_aliasing(sc):
    """{{0}: (0, {}), {1}: (1, {1})} -> ((out_index, operand, operand_index), ...)."""
    sc.expect("{")
    out = []
    while not sc.accept("}"):
        oidx = _int_list(sc)
        sc.expect(":")
        sc.expect("(")
        opnd = sc.integer()
        sc.expect(",")
        pidx = _int_list(sc)
        kind = None
        if sc.accept(","):
            kind = sc.name("an alias kind")
        sc.expect(")")
        out.append((oidx, opnd, pidx, kind) if kind else (oidx, opnd, pidx))
        sc.accept(",")
    return tuple(out)


def _bool(sc, text, key):
    t = text.strip()
    if t not in ("true", "false"):
        raise sc.error("%s must be true or false, not %r" % (key, t))
    return t == "true"


def parse_attr(sc, key, start, end, comp_ref):
    """Parsed value of attribute ``key`` whose raw text spans [start, end)."""
    text = sc.text[start:end]
    sub = SubScanner(sc, start, end)
    if key in _INT_LIST_ATTRS:
        val = _int_list(sub)
    elif key in _INT_ATTRS:
        val = sub.integer()
    elif key in _BOOL_ATTRS:
        return _bool(sc, text, key)
    elif key == "epsilon":
        try:
            return float(np.float32(float(text)))
        except ValueError:
            raise sc.error("bad epsilon %r" % text, start) from None
    elif key in _WORD_ATTRS:
        val = sub.name("a value for %s" % key)
    elif key in _STRING_ATTRS:
        if text.startswith('"'):
            val = sub.string()
        else:
            return text  # backend_config={...} raw JSON
    elif key in _COMP_ATTRS:
        return comp_ref(sub.name("a computation name"), start)
    elif key in _COMP_LIST_ATTRS:
        sub.expect("{")
        names = []
        while not sub.accept("}"):
            p = sub.pos
            names.append(comp_ref(sub.name("a computation name"), p))
            sub.accept(",")
        return names
    elif key == "slice":
        val = _slice(sub)
    elif key == "padding":
        return _padding(sc, text)
    elif key == "window":
        val = _window(sub, end)
    elif key == "dim_labels":
        return _dim_labels(sub, text)
    elif key == "operand_precision":
        sub.expect("{")
        vals = []
        while not sub.accept("}"):
            vals.append(sub.name("a precision").lower())
            sub.accept(",")
        val = tuple(vals) if any(v != "default" for v in vals) else ()
    elif key == "metadata":
        val = _metadata(sub)
    elif key == "frontend_attributes":
        val = key_values(sub)
    elif key == "sharding":
        return text
    elif key == "replica_groups":
        val = _replica_groups(sub)
    elif key == "source_target_pairs":
        val = tuple(tuple(p) for p in _int_list_list(sub))
    elif key == "operand_layout_constraints":
        val = _shape_list(sub)
    elif key == "output_to_operand_aliasing":
        val = parse_aliasing(sub)
    elif key == "outfeed_shape":
        val = parse_shape(sub)
    else:
        raise sc.error("unknown attribute %s" % key, start - len(key) - 1)
    sub.skip_ws()
    if sub.pos != end:
        raise sc.error("unexpected text after the value of %s" % key, sub.pos)
    return val
