"""BIR JSON serde and per-engine streams.

Module JSON (``format: "bir"``, ``version: 1``)::

  {"format": "bir", "version": 1, "name": ..., "target": "trn1", "attrs": {...},
   "tensors": [{"name", "kind", "dtype", "shape", "data"?: {"encoding": "base64", "bytes": ...}}],
   "inputs": [names], "outputs": [names],
   "memlocs": [{"name", "memory", "partitions", "bytes_per_partition", "start_partition", "byte_offset"}],
   "body": [node, ...]}

  node: {"kind": "inst", "id", "opcode", "engine", "dsts": [ap], "srcs": [ap], "attrs": {},
         "waits": [[sem, value]], "signals": [[sem, inc]], "name"?}
      | {"kind": "loop", "id", "var", "start", "stop", "step", "body": [...]}
      | {"kind": "while", "id", "cond", "max_trips"?, "body": [...]}
      | {"kind": "if", "id", "cond", "then": [...], "else": [...]}
  ap:   {"target", "dtype", "offset": int | pelican JSON, "pattern": [[step, num], ...],
         "start_partition": int | null, "num_partitions": int | null}

Wait values are ints or pelican JSON like offsets. Const data is the raw
little-endian bytes of the tensor in its dtype (omitted with const_data=False;
the NEFF stores constants as .npy members instead).

Streams: ``split_by_engine(module)`` -> {engine: [nodes]} keeps every
instruction of that engine with its id, inside copies of the control nodes
(same ids) that enclose it; control nodes holding no instruction at all go to
the SP stream. ``merge_engine_streams(header, streams)`` rebuilds the body by
merging control nodes with equal ids and ordering siblings by id, so
``merge(split(m)) == m`` for a module whose ids are in program order.
"""
import base64
import json

import numpy as np

from neuronxcc.errors import BirFormatError
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.ir import (AccessPattern, If, Instruction, Loop, MemLoc, Module, Tensor, While, pelican_lib,
                                         to_expr)

__all__ = ["module_to_json", "module_from_json", "save", "load", "dumps", "loads", "node_to_json",
           "node_from_json", "split_by_engine", "merge_engine_streams", "stream_to_json", "stream_from_json"]

FORMAT = "bir"
VERSION = 1


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _typed(v, types, what):
    if isinstance(v, bool) and bool not in types or not isinstance(v, types):
        raise BirFormatError("malformed BIR JSON: %s must be %s, got %r"
                             % (what, " or ".join(t.__name__ for t in types), v))
    if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
        raise BirFormatError("malformed BIR JSON: %s %d is outside the 64-bit integer range" % (what, v))
    return v


# The readers below take the common case (a value of exactly the expected JSON type) without
# building the error text; anything else goes through ``_typed``, which raises or accepts it.
_LO, _HI = _INT64


def _int(d, key, what, default=None, optional=False):
    v = d.get(key, default)
    if type(v) is int and _LO <= v <= _HI:
        return v
    if v is None and optional:
        return None
    return _typed(v, (int,), "%s %s" % (what, key))


def _str(d, key, what, optional=False):
    v = d.get(key)
    if type(v) is str:
        return v
    if v is None and optional:
        return None
    return _typed(v, (str,), "%s %s" % (what, key))


def _list(d, key, what, default=()):
    v = d.get(key)
    if type(v) is list:
        return v
    return _typed(d.get(key, list(default)), (list,), "%s %s" % (what, key))


def _obj(v, what):
    if type(v) is dict:
        return v
    return _typed(v, (dict,), what)


def _pairs(v, what):
    """[[a, b], ...] of a JSON list."""
    if type(v) is not list:
        _typed(v, (list,), what)
    for p in v:
        if type(p) is not list or len(p) != 2:
            if not isinstance(p, list) or len(p) != 2:
                raise BirFormatError("malformed BIR JSON: %s must hold [a, b] pairs, got %r" % (what, p))
    return v


def _expr_to_json(e):
    if isinstance(e, int):
        return e
    if e.is_const():
        return int(e)
    return e.to_json()


def _expr_from_json(obj):
    if isinstance(obj, bool) or not isinstance(obj, (int, str, dict, list)):
        raise BirFormatError("expected an integer or pelican expression, got %r" % (obj,))
    if isinstance(obj, int):
        return to_expr(obj)
    pel = pelican_lib()
    try:
        if isinstance(obj, str):
            return pel.parse(obj)
        return pel.Expr.from_json(obj)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as e:
        raise BirFormatError("malformed pelican expression %r: %s" % (obj, e)) from None


def _wait_value_to_json(v):
    return v if isinstance(v, int) else _expr_to_json(v)


def _wait_value_from_json(v):
    if type(v) is int or isinstance(v, int) and not isinstance(v, bool):
        return v
    e = _expr_from_json(v)
    return int(e) if e.is_const() else e


def ap_to_json(ap):
    return {"target": ap.target, "dtype": ap.dtype, "offset": _expr_to_json(ap.offset),
            "pattern": [list(p) for p in ap.pattern], "start_partition": ap.start_partition,
            "num_partitions": ap.num_partitions}


def ap_from_json(obj):
    _obj(obj, "an access pattern")
    what = "access pattern"
    pattern = obj.get("pattern")
    if pattern is not None:
        for p in _pairs(pattern, "access pattern pattern"):
            for x in p:
                if type(x) is not int or not _LO <= x <= _HI:
                    _typed(x, (int,), "an access pattern [step, num]")
    return AccessPattern(_str(obj, "target", what), _str(obj, "dtype", what), _expr_from_json(obj.get("offset", 0)),
                         pattern, _int(obj, "start_partition", what, optional=True),
                         _int(obj, "num_partitions", what, optional=True))


def _attr_to_json(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_attr_to_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _attr_to_json(x) for k, x in v.items()}
    return v


def node_to_json(n):
    if n.kind == "inst":
        d = {"kind": "inst", "id": n.id, "opcode": n.opcode, "engine": n.engine,
             "dsts": [ap_to_json(a) for a in n.dsts], "srcs": [ap_to_json(a) for a in n.srcs],
             "attrs": _attr_to_json(n.attrs), "waits": [[s, _wait_value_to_json(v)] for s, v in n.waits],
             "signals": [[s, v] for s, v in n.signals]}
        if n.name is not None:
            d["name"] = n.name
        return d
    if n.kind == "loop":
        return {"kind": "loop", "id": n.id, "var": n.var, "start": n.start, "stop": n.stop, "step": n.step,
                "body": [node_to_json(c) for c in n.body]}
    if n.kind == "while":
        d = {"kind": "while", "id": n.id, "cond": n.cond, "body": [node_to_json(c) for c in n.body]}
        if n.max_trips is not None:
            d["max_trips"] = n.max_trips
        return d
    if n.kind == "if":
        return {"kind": "if", "id": n.id, "cond": n.cond, "then": [node_to_json(c) for c in n.then_body],
                "else": [node_to_json(c) for c in n.else_body]}
    raise TypeError("not a BIR node: %r" % (n,))


def _body_from_json(d, key, what):
    return [node_from_json(c) for c in _list(d, key, what)]


def node_from_json(d):
    """A BIR node from its JSON; any malformed field raises BirFormatError."""
    _obj(d, "a BIR node")
    k = d.get("kind")
    nid = _int(d, "id", "node", optional=True)
    if k == "inst":
        what = "instruction"
        attrs = _obj(d.get("attrs", {}), "instruction attrs")
        waits = [(s if type(s) is str else _typed(s, (str,), "a wait's semaphore"), _wait_value_from_json(v))
                 for s, v in _pairs(d.get("waits", []), "instruction waits")]
        signals = [(s if type(s) is str else _typed(s, (str,), "a signal's semaphore"),
                    v if type(v) is int and _LO <= v <= _HI else _typed(v, (int,), "a signal's increment"))
                   for s, v in _pairs(d.get("signals", []), "instruction signals")]
        return Instruction(_str(d, "opcode", what), _str(d, "engine", what),
                           [ap_from_json(a) for a in _list(d, "dsts", what)],
                           [ap_from_json(a) for a in _list(d, "srcs", what)], attrs, waits, signals, nid,
                           _str(d, "name", what, optional=True))
    if k == "loop":
        what = "loop"
        return Loop(_str(d, "var", what), _int(d, "start", what), _int(d, "stop", what), _int(d, "step", what, 1),
                    _body_from_json(d, "body", what), nid)
    if k == "while":
        what = "while"
        return While(_str(d, "cond", what), _body_from_json(d, "body", what), nid,
                     _int(d, "max_trips", what, optional=True))
    if k == "if":
        what = "if"
        return If(_str(d, "cond", what), _body_from_json(d, "then", what), _body_from_json(d, "else", what), nid)
    raise BirFormatError("unknown BIR node kind %r" % (k,))


def _tensor_to_json(t, const_data):
    d = {"name": t.name, "kind": t.kind, "dtype": t.dtype, "shape": list(t.shape)}
    if t.arena_offset is not None:
        d["arena_offset"] = t.arena_offset
    if const_data and t.data is not None:
        arr = np.ascontiguousarray(np.asarray(t.data).astype(_dt.np_dtype(t.dtype), copy=False))
        d["data"] = {"encoding": "base64", "bytes": base64.b64encode(arr.tobytes()).decode("ascii")}
    return d


def _tensor_from_json(d):
    _obj(d, "a tensor")
    what = "tensor"
    name, dtype = _str(d, "name", what), _str(d, "dtype", what)
    shape = [_typed(x, (int,), "tensor %s shape" % name) for x in _list(d, "shape", what)]
    if any(x < 0 for x in shape):
        raise BirFormatError("tensor %s has a negative dimension in shape %s" % (name, shape))
    data = None
    if d.get("data") is not None:
        enc = _obj(d["data"], "tensor %s data" % name)
        if enc.get("encoding") != "base64":
            raise BirFormatError("tensor %s: unknown data encoding %r" % (name, enc.get("encoding")))
        try:
            raw = base64.b64decode(_str(enc, "bytes", "tensor %s data" % name), validate=True)
        except (ValueError, TypeError) as e:
            raise BirFormatError("tensor %s: data is not base64: %s" % (name, e)) from None
        data = np.frombuffer(raw, dtype=_dt.np_dtype(dtype)).reshape(shape).copy()
    off = _int(d, "arena_offset", what, optional=True)
    if off is not None and off < 0:
        raise BirFormatError("tensor %s has a negative arena_offset %d" % (name, off))
    return Tensor(name, _str(d, "kind", what), dtype, shape, data, off)


def _memloc_from_json(x):
    _obj(x, "a memloc")
    what = "memloc"
    return MemLoc(_str(x, "name", what), _str(x, "memory", what), _int(x, "partitions", what),
                  _int(x, "bytes_per_partition", what), _int(x, "start_partition", what, optional=True),
                  _int(x, "byte_offset", what, optional=True))


def module_to_json(m, body=True, const_data=True):
    d = {"format": FORMAT, "version": VERSION, "name": m.name, "target": m.target, "attrs": _attr_to_json(m.attrs),
         "tensors": [_tensor_to_json(t, const_data) for t in m.tensors.values()],
         "inputs": list(m.inputs), "outputs": list(m.outputs),
         "memlocs": [{"name": x.name, "memory": x.memory, "partitions": x.partitions,
                      "bytes_per_partition": x.bytes_per_partition, "start_partition": x.start_partition,
                      "byte_offset": x.byte_offset} for x in m.memlocs.values()]}
    if body:
        d["body"] = [node_to_json(n) for n in m.body]
    return d


def module_from_json(d):
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise BirFormatError("not a BIR module (expected a JSON object with format 'bir')")
    if d.get("version") != VERSION:
        raise BirFormatError("unsupported BIR version %r (this reader knows %d)" % (d.get("version"), VERSION))
    try:
        m = Module(_typed(d.get("name", "module"), (str,), "module name"),
                   _typed(d.get("target", "trn1"), (str,), "module target"))
        m.attrs = dict(_obj(d.get("attrs", {}), "module attrs"))
        for t in _list(d, "tensors", "module"):
            t = _tensor_from_json(t)
            m.tensors[t.name] = t
        m.inputs = [_typed(n, (str,), "an input name") for n in _list(d, "inputs", "module")]
        m.outputs = [_typed(n, (str,), "an output name") for n in _list(d, "outputs", "module")]
        for x in _list(d, "memlocs", "module"):
            x = _memloc_from_json(x)
            m.memlocs[x.name] = x
        m.body = _body_from_json(d, "body", "module")
    except BirFormatError:
        raise
    except RecursionError:
        raise BirFormatError("malformed BIR JSON: control nodes nested too deeply") from None
    except (KeyError, TypeError, ValueError, OverflowError) as e:     # values the IR constructors refuse
        raise BirFormatError("malformed BIR JSON: %s: %s" % (type(e).__name__, e)) from None
    return m


def dumps(m, indent=None):
    return json.dumps(module_to_json(m), indent=indent)


def loads(text, body=True):
    """The module in BIR JSON ``text``; with ``body=False`` its header only (tensors, memlocs,
    attrs; an empty body), without building the instructions."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise BirFormatError("BIR JSON does not parse: %s" % e)
    if not body and isinstance(obj, dict):
        obj["body"] = []
    return module_from_json(obj)


def load_attrs(path):
    """The module attrs of a BIR JSON file, without parsing its tensors, memlocs or body when
    ``attrs`` comes before them (as ``module_to_json`` writes it): a walk over the top-level
    keys, decoding only the values before ``attrs``. Raises BirFormatError like ``load``."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise BirFormatError("cannot read BIR file %s: %s" % (path, e.strerror or e))
    dec = json.JSONDecoder()
    ws = " \t\n\r"
    try:
        i = len(text) - len(text.lstrip(ws))
        if text[i] != "{":
            raise ValueError("not an object")
        i += 1
        while True:
            while text[i] in ws:
                i += 1
            if text[i] == "}":
                return {}
            key, i = dec.raw_decode(text, i)
            while text[i] in ws:
                i += 1
            if text[i] != ":":
                raise ValueError("expected ':' at %d" % i)
            i += 1
            while text[i] in ws:
                i += 1
            val, i = dec.raw_decode(text, i)
            if key == "attrs":
                return dict(_obj(val, "module attrs"))
            while text[i] in ws:
                i += 1
            if text[i] == ",":
                i += 1
    except (ValueError, IndexError) as e:
        raise BirFormatError("BIR JSON does not parse: %s" % e)


def save(m, path, indent=None):
    """Write module M as BIR JSON to PATH."""
    # json.dumps, not json.dump: only the one-shot form uses the C encoder (5x faster)
    text = json.dumps(module_to_json(m), indent=indent)
    with open(path, "w") as f:
        f.write(text)
        f.write("\n")


def load(path, body=True):
    """Read a BIR JSON file (``body=False``: its header only, see ``loads``). Raises
    BirFormatError on anything unreadable."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise BirFormatError("cannot read BIR file %s: %s" % (path, e.strerror or e))
    return loads(text, body)


# -- per-engine streams ------------------------------------------------------

def _engines_in(node, memo):
    key = id(node)
    if key in memo:
        return memo[key]
    if node.kind == "inst":
        r = {node.engine}
    else:
        r = set()
        for child in node.children():
            for c in child:
                r |= _engines_in(c, memo)
    memo[key] = r
    return r


def _filter(body, engine, memo):
    out = []
    for n in body:
        engs = _engines_in(n, memo)
        if n.kind == "inst":
            if n.engine == engine:
                out.append(n)
            continue
        if engine not in engs and not (not engs and engine == "SP"):
            continue
        if n.kind == "loop":
            out.append(Loop(n.var, n.start, n.stop, n.step, _filter(n.body, engine, memo), n.id))
        elif n.kind == "while":
            out.append(While(n.cond, _filter(n.body, engine, memo), n.id, n.max_trips))
        else:
            out.append(If(n.cond, _filter(n.then_body, engine, memo), _filter(n.else_body, engine, memo), n.id))
    return out


def split_by_engine(module):
    """{engine: [nodes]} for every engine that has work (ids kept; see module doc)."""
    module.ensure_ids()
    memo = {}
    streams = {}
    from neuronxcc.starfish.birpy.opcodes import ENGINES
    for eng in ENGINES:
        nodes = _filter(module.body, eng, memo)
        if nodes:
            streams[eng] = nodes
    return streams


def stream_to_json(nodes):
    return [node_to_json(n) for n in nodes]


def stream_from_json(obj):
    """Nodes of one engine stream's JSON; BirFormatError when malformed."""
    try:
        return [node_from_json(n) for n in _typed(obj, (list,), "an engine stream")]
    except BirFormatError:
        raise
    except RecursionError:
        raise BirFormatError("malformed engine stream: control nodes nested too deeply") from None
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise BirFormatError("malformed engine stream: %s: %s" % (type(e).__name__, e)) from None


def _merge(lists):
    by_id = {}
    order = []
    for lst in lists:
        for n in lst:
            if n.id is None:
                raise BirFormatError("engine stream node without an id: %r" % (n,))
            if n.id not in by_id:
                by_id[n.id] = [n]
                order.append(n.id)
            else:
                by_id[n.id].append(n)
    out = []
    for i in sorted(order):
        group = by_id[i]
        first = group[0]
        if first.kind == "inst":
            if len(group) > 1:
                raise BirFormatError("instruction id %d appears in more than one engine stream" % i)
            out.append(first)
            continue
        if any(g.kind != first.kind for g in group):
            raise BirFormatError("node id %d has different kinds in different streams" % i)
        if first.kind == "loop":
            out.append(Loop(first.var, first.start, first.stop, first.step, _merge([g.body for g in group]), i))
        elif first.kind == "while":
            out.append(While(first.cond, _merge([g.body for g in group]), i, first.max_trips))
        else:
            out.append(If(first.cond, _merge([g.then_body for g in group]), _merge([g.else_body for g in group]), i))
    return out


def merge_engine_streams(header, streams):
    """Rebuild a module from HEADER (a Module or module JSON; its body is ignored)
    and STREAMS ({engine: [nodes] or stream JSON})."""
    if isinstance(header, dict):
        header = module_from_json(dict(header, body=[]))
    m = Module(header.name, header.target)
    m.tensors = dict(header.tensors)
    m.memlocs = dict(header.memlocs)
    m.inputs = list(header.inputs)
    m.outputs = list(header.outputs)
    m.attrs = dict(header.attrs)
    lists = []
    for eng, nodes in streams.items():
        if nodes and isinstance(nodes[0], dict):
            nodes = stream_from_json(nodes)
        lists.append(list(nodes))
    m.body = _merge(lists)
    return m
