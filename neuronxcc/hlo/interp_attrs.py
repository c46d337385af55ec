"""Read an instruction's attributes in the forms the interpreter needs.

The module model (``neuronxcc.hlo.model``) keeps each op's attributes in
``inst.attrs``, parsed from HLO text or from the proto's structured fields.
These accessors turn whatever form an attribute arrives in (list of ints,
HLO-text string, dict, or an object with fields) into plain Python values, so
the interpreter's handlers never parse text themselves.

Invariant: every accessor returns fresh plain Python ints/lists/strs/dicts.
"""
import re

from neuronxcc.errors import HloVerifyError


def _get(obj, key, default=None):
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def attr(inst, key, default=None):
    attrs = getattr(inst, "attrs", None) or {}
    if key in attrs:
        return attrs[key]
    return default


def ints(v):
    """A list of ints from a list/tuple, an int, or text such as '{1,2}' or '1x8'."""
    if v is None:
        return []
    if isinstance(v, bool):
        return [int(v)]
    if isinstance(v, int):
        return [v]
    if isinstance(v, str):
        return [int(t) for t in re.findall(r"-?\d+", v)]
    return [int(x) for x in v]


def int_list(inst, key, default=None):
    v = attr(inst, key, None)
    if v is None:
        return list(default) if default is not None else []
    return ints(v)


def int_attr(inst, key, default=None):
    v = attr(inst, key, None)
    if v is None:
        return default
    if isinstance(v, str):
        v = v.strip().strip('"')
        if v in ("true", "false"):
            return int(v == "true")
        return int(v)
    if isinstance(v, (list, tuple)):
        return int(v[0])
    return int(v)


def bool_attr(inst, key, default=False):
    v = attr(inst, key, None)
    if v is None:
        return default
    if isinstance(v, str):
        return v.strip().lower() == "true"
    return bool(v)


def str_attr(inst, key, default=None):
    v = attr(inst, key, None)
    if v is None:
        return default
    if isinstance(v, str):
        return v.strip().strip('"')
    name = _get(v, "name")
    if isinstance(name, str):
        return name
    return str(v)


def computation(ev, inst, key):
    """The HloComputation an attribute names (``to_apply=``, ``body=``...)."""
    v = attr(inst, key, None)
    if v is None:
        raise HloVerifyError("instruction %s has no %s computation" % (inst.name, key))
    return ev.resolve_computation(v)


def computations(ev, inst, key):
    v = attr(inst, key, None)
    if v is None:
        return []
    if isinstance(v, str):
        names = [t.strip() for t in v.strip("{} ").split(",") if t.strip()]
        return [ev.resolve_computation(n) for n in names]
    return [ev.resolve_computation(c) for c in v]


# --- windows (reduce-window, select-and-scatter, convolution) -----------------

def window(inst, rank, key="window"):
    """The window as a dict of per-dimension lists.

    Keys: size, stride, pad_lo, pad_hi, base_dilation, window_dilation,
    reversal (bools). Missing fields take XLA's defaults (stride 1, pad 0,
    dilation 1, no reversal).
    """
    w = attr(inst, key, None)
    out = {"size": [1] * rank, "stride": [1] * rank, "pad_lo": [0] * rank, "pad_hi": [0] * rank,
           "base_dilation": [1] * rank, "window_dilation": [1] * rank, "reversal": [False] * rank}
    if w is None:
        return out
    if isinstance(w, str):
        _window_from_text(w, out)
    elif isinstance(w, dict) and ("size" in w or "stride" in w or "pad" in w):
        _window_from_mapping(w, out)
    elif isinstance(w, (list, tuple)):
        for d, dim in enumerate(w):
            _window_dim(dim, d, out)
    else:
        dims = _get(w, "dimensions")
        if dims is not None:
            for d, dim in enumerate(dims):
                _window_dim(dim, d, out)
        else:
            _window_from_mapping({k: _get(w, k) for k in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate",
                                                          "rhs_reversal")}, out)
    for k in ("size", "stride", "pad_lo", "pad_hi", "base_dilation", "window_dilation", "reversal"):
        if len(out[k]) != rank:
            raise HloVerifyError("instruction %s: window %s has %d dimensions, expected %d"
                                 % (inst.name, k, len(out[k]), rank))
    return out


def _window_dim(dim, d, out):
    def g(*names, default=None):
        for n in names:
            v = _get(dim, n)
            if v is not None:
                return v
        return default
    out["size"][d] = int(g("size", default=1))
    out["stride"][d] = int(g("stride", default=1) or 1)
    out["pad_lo"][d] = int(g("padding_low", "pad_lo", "low", default=0))
    out["pad_hi"][d] = int(g("padding_high", "pad_hi", "high", default=0))
    out["base_dilation"][d] = int(g("base_dilation", "lhs_dilate", default=1) or 1)
    out["window_dilation"][d] = int(g("window_dilation", "rhs_dilate", default=1) or 1)
    out["reversal"][d] = bool(g("window_reversal", "reversal", "rhs_reversal", default=False))


def _xlist(v):
    if isinstance(v, str):
        return [int(t) for t in v.split("x")]
    return ints(v)


def _window_from_mapping(w, out):
    if w.get("size") is not None:
        out["size"] = _xlist(w["size"])
        n = len(out["size"])
        for k, d in (("stride", 1), ("pad_lo", 0), ("pad_hi", 0), ("base_dilation", 1),
                     ("window_dilation", 1)):
            out[k] = [d] * n
        out["reversal"] = [False] * n
    if w.get("stride") is not None:
        out["stride"] = _xlist(w["stride"])
    if w.get("pad") is not None:
        pad = w["pad"]
        if isinstance(pad, str):
            pairs = [p.split("_") for p in pad.split("x")]
            out["pad_lo"] = [int(p[0]) for p in pairs]
            out["pad_hi"] = [int(p[1]) for p in pairs]
        else:
            out["pad_lo"] = [int(p[0]) for p in pad]
            out["pad_hi"] = [int(p[1]) for p in pad]
    if w.get("lhs_dilate") is not None:
        out["base_dilation"] = _xlist(w["lhs_dilate"])
    if w.get("rhs_dilate") is not None:
        out["window_dilation"] = _xlist(w["rhs_dilate"])
    if w.get("rhs_reversal") is not None:
        out["reversal"] = [bool(x) for x in _xlist(w["rhs_reversal"])]


def _window_from_text(text, out):
    fields = {}
    for tok in text.strip().strip("{}").split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            fields[k.strip()] = v.strip()
    if fields:
        _window_from_mapping(fields, out)


# --- slices, padding ----------------------------------------------------------

def slice_spec(inst, rank):
    """(starts, limits, strides) of a ``slice``."""
    starts = attr(inst, "slice_starts", None)
    if starts is not None:
        return ints(starts), int_list(inst, "slice_limits"), int_list(inst, "slice_strides", [1] * rank)
    v = attr(inst, "slice", None)
    if v is None:
        raise HloVerifyError("slice %s has no slice attribute" % inst.name)
    if isinstance(v, str):
        out = ([], [], [])
        for part in re.findall(r"\[([^\]]*)\]", v):
            nums = [int(t) for t in part.split(":")]
            out[0].append(nums[0])
            out[1].append(nums[1])
            out[2].append(nums[2] if len(nums) > 2 else 1)
        return out
    if isinstance(v, dict):
        return ints(v["starts"]), ints(v["limits"]), ints(v.get("strides", [1] * rank))
    starts, limits, strides = [], [], []
    for d in v:
        if isinstance(d, (list, tuple)):
            starts.append(int(d[0]))
            limits.append(int(d[1]))
            strides.append(int(d[2]) if len(d) > 2 else 1)
        else:
            starts.append(int(_get(d, "start")))
            limits.append(int(_get(d, "limit")))
            strides.append(int(_get(d, "stride", 1) or 1))
    return starts, limits, strides


def padding_config(inst, rank):
    """List of (low, high, interior) per dimension of a ``pad``."""
    v = attr(inst, "padding", None)
    if v is None:
        v = attr(inst, "padding_config", None)
    if v is None:
        return [(0, 0, 0)] * rank
    if isinstance(v, str):
        out = []
        for part in v.strip().split("x"):
            nums = [int(t) for t in part.split("_")]
            out.append((nums[0], nums[1], nums[2] if len(nums) > 2 else 0))
        return out
    dims = _get(v, "dimensions", v)
    out = []
    for d in dims:
        if isinstance(d, (list, tuple)):
            out.append((int(d[0]), int(d[1]), int(d[2]) if len(d) > 2 else 0))
        else:
            out.append((int(_get(d, "edge_padding_low", _get(d, "low", 0)) or 0),
                        int(_get(d, "edge_padding_high", _get(d, "high", 0)) or 0),
                        int(_get(d, "interior_padding", _get(d, "interior", 0)) or 0)))
    return out


# --- dimension numbers --------------------------------------------------------

def _dimnums(inst, key, fields):
    """Fields of a dimension-numbers attribute given flat (text) or nested (proto)."""
    nested = attr(inst, key, None)
    out = {}
    for f in fields:
        v = attr(inst, f, None)
        if v is None and nested is not None:
            v = _get(nested, f)
        out[f] = ints(v)
    return out


def dot_dims(inst):
    return _dimnums(inst, "dot_dimension_numbers",
                    ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"))


def gather_dims(inst):
    d = _dimnums(inst, "gather_dimension_numbers",
                 ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                  "start_indices_batching_dims"))
    d["index_vector_dim"] = _scalar_dimnum(inst, "gather_dimension_numbers", "index_vector_dim")
    d["slice_sizes"] = int_list(inst, "slice_sizes") or ints(attr(inst, "gather_slice_sizes", []))
    return d


def scatter_dims(inst):
    d = _dimnums(inst, "scatter_dimension_numbers",
                 ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                  "input_batching_dims", "scatter_indices_batching_dims"))
    d["index_vector_dim"] = _scalar_dimnum(inst, "scatter_dimension_numbers", "index_vector_dim")
    return d


def _scalar_dimnum(inst, key, field):
    v = attr(inst, field, None)
    if v is None:
        v = _get(attr(inst, key, None), field)
    if v is None:
        raise HloVerifyError("instruction %s has no %s" % (inst.name, field))
    return ints(v)[0]


def conv_dims(inst, rank):
    """Convolution dimension numbers as a dict.

    Keys: in_batch, in_feature, in_spatial, k_in, k_out, k_spatial, out_batch,
    out_feature, out_spatial (the spatial lists in window order).
    """
    labels = attr(inst, "dim_labels", None)
    if isinstance(labels, str):
        return _parse_dim_labels(labels, inst)
    cd = attr(inst, "convolution_dimension_numbers", None)
    if cd is None and labels is not None and _get(labels, "input_batch_dimension") is not None:
        cd = labels
    if cd is not None and not isinstance(cd, str):
        return {
            "in_batch": int(_get(cd, "input_batch_dimension")),
            "in_feature": int(_get(cd, "input_feature_dimension")),
            "in_spatial": ints(_get(cd, "input_spatial_dimensions")),
            "k_in": int(_get(cd, "kernel_input_feature_dimension")),
            "k_out": int(_get(cd, "kernel_output_feature_dimension")),
            "k_spatial": ints(_get(cd, "kernel_spatial_dimensions")),
            "out_batch": int(_get(cd, "output_batch_dimension")),
            "out_feature": int(_get(cd, "output_feature_dimension")),
            "out_spatial": ints(_get(cd, "output_spatial_dimensions")),
        }
    if isinstance(cd, str):
        return _parse_dim_labels(cd, inst)
    if labels is not None:
        return {k: (ints(v) if isinstance(v, (list, tuple)) else int(v)) for k, v in dict(labels).items()}
    raise HloVerifyError("convolution %s has no dim_labels" % inst.name)


def _parse_dim_labels(text, inst):
    try:
        lhs, rest = text.split("_", 1)
        rhs, out = rest.split("->")
    except ValueError:
        raise HloVerifyError("convolution %s: bad dim_labels %r" % (inst.name, text))

    def spatial(s):
        pos = {}
        for i, ch in enumerate(s):
            if ch.isdigit():
                pos[int(ch)] = i
        return [pos[k] for k in sorted(pos)]
    return {
        "in_batch": lhs.index("b"), "in_feature": lhs.index("f"), "in_spatial": spatial(lhs),
        "k_in": rhs.index("i"), "k_out": rhs.index("o"), "k_spatial": spatial(rhs),
        "out_batch": out.index("b"), "out_feature": out.index("f"), "out_spatial": spatial(out),
    }
