"""HLO text -> the module model.

Reads the text XLA prints (``HloModule::ToString``) as JAX and torch-xla emit
it: module header attributes (entry_computation_layout, frontend_attributes,
input_output_alias, ...), computations with or without ``%`` sigils and
program-shape headers, ``ROOT``, operands with or without their shapes,
layouts (tiles and memory spaces are skipped), constants (scalars, nested
arrays, tuples, inf/nan), and every attribute form in ``_ATTR_PARSERS``.
Instructions may refer to operands defined later in their computation; the
model lists them operands-first. Every failure is an HloParseError carrying
the line and column of the offending text.
"""
import bisect
import re

import numpy as np

from neuronxcc.errors import CompilerError, HloParseError, HloVerifyError
from neuronxcc.hlo.proto_io import allowed_attrs
from neuronxcc.hlo.model import (ConvDims, HloComputation, HloInstruction, HloModule, Shape, WindowDim,
                                 ARRAY_TYPES, ELEMENT_TYPES, assign_called_attrs, check_literal_size, dtype_of,
                                 fill_attr_defaults)

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-%$]+")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_INT = re.compile(r"[-+]?\d+")
_WS = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)+", re.S)
_NUMBER_TOKEN = re.compile(r"-?nan(?:\(0x[0-9a-fA-F]+\))?|[-+]?inf|true|false|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_LITERAL_PUNCT = re.compile(r'[{}()="]')
# a body of plain decimal numbers (the common case) needs no per-token check
_NUMBERS_ONLY = re.compile(r"[\s{},0-9.eE+\-]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v"}

# attribute name -> kind
_INT_LIST_ATTRS = frozenset((
    "dimensions", "slice_sizes", "dynamic_slice_sizes", "lhs_contracting_dims", "rhs_contracting_dims",
    "lhs_batch_dims", "rhs_batch_dims", "offset_dims", "collapsed_slice_dims", "start_index_map",
    "operand_batching_dims", "start_indices_batching_dims", "update_window_dims", "inserted_window_dims",
    "scatter_dims_to_operand_dims", "input_batching_dims", "scatter_indices_batching_dims", "fft_length"))
_INT_ATTRS = frozenset(("index", "iota_dimension", "index_vector_dim", "feature_group_count", "batch_group_count",
                        "exponent_bits", "mantissa_bits", "feature_index", "channel_id", "k", "delta"))
_BOOL_ATTRS = frozenset(("is_stable", "indices_are_sorted", "unique_indices", "custom_call_has_side_effect",
                         "largest", "use_global_device_ids", "constrain_layout", "is_host_transfer"))
_WORD_ATTRS = frozenset(("direction", "type", "api_version", "distribution", "algorithm", "kind", "fft_type",
                         "schedule"))
_STRING_ATTRS = frozenset(("custom_call_target", "backend_config", "infeed_config", "outfeed_config"))
_COMP_ATTRS = frozenset(("to_apply", "body", "condition", "select", "scatter", "calls", "true_computation",
                         "false_computation"))
_COMP_LIST_ATTRS = frozenset(("branch_computations", "called_computations"))
# attributes read and dropped (no meaning for this compiler, not in our proto subset)
_IGNORED_ATTRS = frozenset(("statistics", "origin", "result_accuracy", "is_composite", "composite",
                            "control-predecessors", "domain", "layout", "dynamic_slice_sizes_", "async_group_id",
                            "async_execution_thread", "mode", "algorithm_", "sparsity", "original_value"))


class _Scanner:
    """Position-tracking reader over the whole text."""

    def __init__(self, text):
        self.text = text
        self.pos = 0
        self._lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.frames = {}  # stack frame id -> (file, line), from the StackFrames sections

    def where(self, pos=None):
        pos = self.pos if pos is None else pos
        line = bisect.bisect_right(self._lines, pos)
        return line, pos - self._lines[line - 1] + 1

    def error(self, msg, pos=None):
        line, col = self.where(pos)
        return HloParseError(msg, line=line, column=col)

    def skip_ws(self):
        m = _WS.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def peek(self, s):
        """True when ``s`` comes next (after blanks); the position does not move."""
        save = self.pos
        self.skip_ws()
        found = self.text.startswith(s, self.pos)
        self.pos = save
        return found

    def accept(self, s):
        save = self.pos
        self.skip_ws()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        self.pos = save
        return False

    def expect(self, s, what=None):
        before = self.pos
        if not self.accept(s):
            # something missing at the end of a line is reported where the line ends
            self.skip_ws()
            at = before if "\n" in self.text[before:self.pos] else self.pos
            raise self.error("expected %s, found %s" % (what or repr(s), self._found()), at)

    def _found(self):
        if self.pos >= len(self.text):
            return "end of input"
        return repr(self.text[self.pos:self.pos + 20].split("\n")[0])

    def name(self, what="a name"):
        self.skip_ws()
        m = _NAME_CHARS.match(self.text, self.pos)
        if not m:
            raise self.error("expected %s, found %s" % (what, self._found()))
        self.pos = m.end()
        return m.group(0).lstrip("%")

    def integer(self, what="an integer"):
        self.skip_ws()
        m = _INT.match(self.text, self.pos)
        if not m:
            raise self.error("expected %s, found %s" % (what, self._found()))
        self.pos = m.end()
        return int(m.group(0))

    def string(self):
        """A double-quoted C-escaped string; returns str (bytes escapes via surrogateescape)."""
        self.skip_ws()
        start = self.pos
        if not self.text.startswith('"', self.pos):
            raise self.error("expected a string, found %s" % self._found())
        i, n, out = self.pos + 1, len(self.text), bytearray()
        while True:
            if i >= n:
                raise self.error("unterminated string", start)
            ch = self.text[i]
            if ch == '"':
                break
            if ch == "\\":
                i += 1
                if i >= n:
                    raise self.error("unterminated string", start)
                e = self.text[i]
                if e in _ESCAPES:
                    out += _ESCAPES[e].encode()
                    i += 1
                elif e in "01234567":
                    j = i
                    while j < min(i + 3, n) and self.text[j] in "01234567":
                        j += 1
                    out.append(int(self.text[i:j], 8) & 0xFF)
                    i = j
                elif e == "x":
                    j = i + 1
                    while j < min(i + 3, n) and self.text[j] in "0123456789abcdefABCDEF":
                        j += 1
                    if j == i + 1:
                        raise self.error("bad \\x escape in string", i)
                    out.append(int(self.text[i + 1:j], 16))
                    i = j
                else:
                    raise self.error("unknown escape \\%s in string" % e, i)
                continue
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        self.pos = i + 1
        return out.decode("utf-8", "surrogateescape")

    def raw_value(self):
        """Span of an attribute value: up to a top-level ',' or end of line; balanced brackets and strings."""
        self.skip_ws()
        start, i, n, depth = self.pos, self.pos, len(self.text), 0
        while i < n:
            ch = self.text[i]
            if ch == '"':
                save = self.pos
                self.pos = i
                self.string()
                i, self.pos = self.pos, save
                continue
            if ch in "{[(":
                depth += 1
            elif ch in "}])":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (ch == "," or ch == "\n"):
                break
            i += 1
        if depth:
            raise self.error("unbalanced brackets in attribute value", start)
        self.pos = i
        end = i
        while end > start and self.text[end - 1] in " \t\r":
            end -= 1
        return start, end


# -- shapes ----------------------------------------------------------------------

def parse_shape(sc, depth=0):
    sc.skip_ws()
    if depth > 64:
        raise sc.error("tuple shape nested too deeply")
    if sc.accept("("):
        elems = []
        if not sc.accept(")"):
            while True:
                elems.append(parse_shape(sc, depth + 1))
                if sc.accept(")"):
                    break
                sc.expect(",", "',' or ')' in a tuple shape")
        return Shape("tuple", tuple_shapes=elems)
    start = sc.pos
    m = re.compile(r"[a-z][a-z0-9]*").match(sc.text, sc.pos)
    if not m or m.group(0) not in ELEMENT_TYPES:
        raise sc.error("expected a shape, found %s" % sc._found())
    et = m.group(0)
    sc.pos = m.end()
    if not sc.text.startswith("[", sc.pos):
        if et in ("token", "opaque"):
            return Shape(et)
        raise sc.error("expected '[' after element type %s" % et)
    sc.pos += 1
    dims, dyn = [], []
    if not sc.accept("]"):
        while True:
            sc.skip_ws()
            is_dyn = sc.accept("<=")
            if sc.accept("?"):
                raise sc.error("unbounded dynamic dimensions are not supported")
            dims.append(sc.integer("a dimension size"))
            dyn.append(is_dyn)
            if sc.accept("]"):
                break
            sc.expect(",", "',' or ']' in dimensions")
    if et in ("token", "opaque"):
        return Shape(et)
    layout = None
    if sc.text.startswith("{", sc.pos):
        sc.pos += 1
        layout = []
        while True:
            sc.skip_ws()
            if sc.text.startswith("}", sc.pos) or sc.text.startswith(":", sc.pos):
                break
            layout.append(sc.integer("a layout dimension"))
            if not sc.accept(","):
                break
        if sc.accept(":"):  # tiles, memory space, element size: skipped
            depth2 = 0
            while sc.pos < len(sc.text):
                ch = sc.text[sc.pos]
                if ch in "([":
                    depth2 += 1
                elif ch in ")]":
                    depth2 -= 1
                elif ch == "}" and depth2 == 0:
                    break
                sc.pos += 1
        sc.expect("}", "'}' closing a layout")
        if not dims and not layout:
            layout = None
    try:
        return Shape(et, dims, layout=layout, dynamic_dims=dyn)
    except HloVerifyError as e:
        raise sc.error(str(e), start) from None


# -- literals ----------------------------------------------------------------------

def _convert_values(sc, tokens, shape, pos, maybe_neg_nan=True):
    dt = dtype_of(shape.element_type)
    n = shape.numel()
    if len(tokens) != n:
        raise sc.error("constant has %d values, its shape %s needs %d" % (len(tokens), shape.to_text(False), n), pos)
    et = shape.element_type
    try:
        if et == "pred":
            vals = [t == "true" or (t not in ("false",) and float(t) != 0) for t in tokens]
            return np.array(vals, dtype=np.bool_).reshape(shape.dims)
        if et.startswith("s") or et.startswith("u"):
            try:  # fast path: plain decimal integers, converted by numpy
                wide = np.array(tokens, dtype=np.uint64 if et == "u64" else np.int64) if tokens else \
                    np.zeros(0, np.int64)
                ints = None
            except (ValueError, OverflowError):
                ints = [int(t) if re.fullmatch(r"[-+]?\d+", t) else _int_from_float(t) for t in tokens]
            info = np.iinfo(dt)
            if ints is not None:
                if any(v < info.min or v > info.max for v in ints):
                    raise sc.error("integer constant out of range for %s" % et, pos)
                return np.array(ints, dtype=dt).reshape(shape.dims)
            if wide.size and (wide.min() < info.min or wide.max() > info.max):
                raise sc.error("integer constant out of range for %s" % et, pos)
            return wide.astype(dt).reshape(shape.dims)
        try:  # fast path: numpy parses decimal, inf and nan itself
            floats = np.array(tokens, dtype=np.float64) if tokens else np.zeros(0)
            neg_nan = [k for k, t in enumerate(tokens) if t.startswith("-n")] if maybe_neg_nan else []
            if neg_nan:
                floats[neg_nan] = -np.abs(floats[neg_nan])
        except ValueError:
            floats = np.array([_float_token(t) for t in tokens], dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            return floats.astype(dt).reshape(shape.dims)
    except (ValueError, OverflowError) as e:
        raise sc.error("bad constant value for %s: %s" % (et, e), pos) from None


def _float_token(t):
    if t in ("true", "false"):
        return 1.0 if t == "true" else 0.0
    if "nan" in t:
        return -float("nan") if t.startswith("-") else float("nan")
    return float(t)


def _int_from_float(t):
    if t in ("true", "false"):
        return int(t == "true")
    f = float(t)
    if f != int(f):
        raise ValueError("%s is not an integer" % t)
    return int(f)


def parse_literal(sc, shape, depth=0):
    """Literal for ``shape`` at the scanner position (inside constant(...))."""
    sc.skip_ws()
    if depth > 64:
        raise sc.error("tuple constant nested too deeply")
    if shape.is_tuple:
        sc.expect("(", "'(' starting a tuple constant")
        vals = []
        for k, s in enumerate(shape.tuple_shapes):
            if k:
                sc.expect(",")
            vals.append(parse_literal(sc, s, depth + 1))
        sc.expect(")", "')' closing a tuple constant")
        return tuple(vals)
    if not shape.is_array:
        raise sc.error("constant of shape %s cannot hold a value" % shape.to_text(False))
    check_literal_size(shape, "constant")
    start = sc.pos
    # an old form repeats the shape inside: constant(f32[2] {1, 2})
    m = re.compile(r"[a-z][a-z0-9]*\[").match(sc.text, sc.pos)
    if m and m.group(0)[:-1] in ARRAY_TYPES:
        parse_shape(sc)
        sc.skip_ws()
        start = sc.pos
    if sc.text.startswith("{...}", sc.pos):
        raise sc.error("constant values are elided ({...}); print the HLO with large constants included")
    if sc.text.startswith("{", sc.pos):
        depth2, i = 0, None
        for m in _LITERAL_PUNCT.finditer(sc.text, sc.pos):  # numbers between braces are skipped in C
            ch = m.group(0)
            if ch == "{":
                depth2 += 1
            elif ch == "}":
                depth2 -= 1
                if depth2 == 0:
                    i = m.start()
                    break
            else:
                raise sc.error("unexpected %r in an array constant" % ch, m.start())
        if i is None:
            raise sc.error("unbalanced braces in constant", start)
        body = sc.text[sc.pos:i + 1]
        sc.pos = i + 1
        tokens = body.replace("{", " ").replace("}", " ").replace(",", " ").split()
        maybe_neg_nan = "-n" in body
        if tokens and not _NUMBERS_ONLY.fullmatch(body):
            for t in tokens:
                if not _NUMBER_TOKEN.fullmatch(t):
                    raise sc.error("unexpected %r in an array constant" % t[:20], start)
    else:
        m = _NUMBER_TOKEN.match(sc.text, sc.pos)
        if not m:
            raise sc.error("expected a constant value, found %s" % sc._found())
        sc.pos = m.end()
        tokens = [m.group(0)]
        maybe_neg_nan = tokens[0].startswith("-n")
        if shape.numel() != 1 and shape.numel() > 0:
            # XLA accepts a scalar broadcast to the shape only for rank-0; a splat is an error here
            raise sc.error("constant of shape %s needs an array value {...}" % shape.to_text(False), start)
    return _convert_values(sc, tokens, shape, start, maybe_neg_nan)


# -- attribute values ----------------------------------------------------------------

class _Sub(_Scanner):
    """A scanner restricted to [start, end) of the parent text (positions stay global)."""

    def __init__(self, parent, start, end):
        self.text = parent.text[:end]
        self.pos = start
        self._lines = parent._lines
        self.frames = parent.frames


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


def _key_values(sc):
    """{k="v" k2=3, ...} -> dict (values: str for strings, raw text otherwise)."""
    sc.expect("{")
    out = {}
    while not sc.accept("}"):
        key = sc.string() if sc.peek('"') else sc.name("an attribute key")
        sc.expect("=")
        if sc.peek('"'):
            out[key] = sc.string()
        elif sc.peek("{"):
            s, e = _balanced(sc)
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


def _balanced(sc):
    sc.skip_ws()
    start, depth, i = sc.pos, 0, sc.pos
    while i < len(sc.text):
        ch = sc.text[i]
        if ch == '"':
            sc.pos = i
            sc.string()
            i = sc.pos
            continue
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                sc.pos = i + 1
                return start, i + 1
        i += 1
    raise sc.error("unbalanced braces", start)


_METADATA_INT = ("source_line", "source_end_line", "source_column", "source_end_column", "stack_frame_id")


def _metadata(sc):
    kv = _key_values(sc)
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


def _aliasing(sc):
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
    sub = _Sub(sc, start, end)
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
        val = _key_values(sub)
    elif key == "sharding":
        return text
    elif key == "replica_groups":
        val = _replica_groups(sub)
    elif key == "source_target_pairs":
        val = tuple(tuple(p) for p in _int_list_list(sub))
    elif key == "operand_layout_constraints":
        val = _shape_list(sub)
    elif key == "output_to_operand_aliasing":
        val = _aliasing(sub)
    elif key == "outfeed_shape":
        val = parse_shape(sub)
    else:
        raise sc.error("unknown attribute %s" % key, start - len(key) - 1)
    sub.skip_ws()
    if sub.pos != end:
        raise sc.error("unexpected text after the value of %s" % key, sub.pos)
    return val


# -- instructions, computations, module -------------------------------------------------

class _Rec:
    __slots__ = ("name", "opcode", "shape", "operands", "attrs", "literal", "pnum", "root", "pos")


def _parse_instruction(sc):
    rec = _Rec()
    rec.pos = sc.pos
    rec.root = False
    sc.skip_ws()
    m = re.compile(r"ROOT\s").match(sc.text, sc.pos)
    if m:
        sc.pos = m.end()
        rec.root = True
    rec.pos = sc.pos
    rec.name = sc.name("an instruction name")
    sc.expect("=", "'=' after instruction name %s" % rec.name)
    rec.shape = parse_shape(sc)
    sc.skip_ws()
    m = _OPCODE.match(sc.text, sc.pos)
    if not m:
        raise sc.error("expected an opcode, found %s" % sc._found())
    rec.opcode = m.group(0)
    sc.pos = m.end()
    sc.expect("(", "'(' after opcode %s" % rec.opcode)
    rec.operands, rec.literal, rec.pnum = [], None, None
    if rec.opcode == "constant":
        rec.literal = parse_literal(sc, rec.shape)
        sc.expect(")", "')' closing the constant")
    elif rec.opcode == "parameter":
        rec.pnum = sc.integer("a parameter number")
        if rec.pnum < 0:
            raise sc.error("negative parameter number")
        sc.expect(")", "')' closing parameter(...)")
    elif not sc.accept(")"):
        while True:
            sc.skip_ws()
            # an operand may carry its shape: f32[2]{0} %x
            if sc.text.startswith("(", sc.pos) or re.compile(r"[a-z][a-z0-9]*\[").match(sc.text, sc.pos) or \
                    re.compile(r"token\[?\]?\s").match(sc.text, sc.pos):
                m2 = re.compile(r"[a-z][a-z0-9]*").match(sc.text, sc.pos)
                if sc.text.startswith("(", sc.pos) or (m2 and m2.group(0) in ELEMENT_TYPES):
                    parse_shape(sc)
            p = sc.pos
            rec.operands.append((sc.name("an operand name"), p))
            if sc.accept(")"):
                break
            sc.expect(",", "',' or ')' in the operand list")
    rec.attrs = []
    while True:
        save = sc.pos
        sc.skip_ws()
        if not sc.text.startswith(",", sc.pos):
            sc.pos = save
            break
        sc.pos += 1
        key = sc.name("an attribute name")
        sc.expect("=", "'=' after attribute %s" % key)
        start, end = sc.raw_value()
        if start == end:
            if key != "padding":
                raise sc.error("attribute %s has no value" % key, start)
        rec.attrs.append((key, start, end))
    return rec


def _parse_computation(sc):
    sc.skip_ws()
    is_entry = False
    m = re.compile(r"ENTRY\s").match(sc.text, sc.pos)
    if m:
        sc.pos = m.end()
        is_entry = True
    pos = sc.pos
    name = sc.name("a computation name")
    if sc.peek("("):  # (p: shape, ...) -> shape
        _balanced(sc)
        sc.expect("->", "'->' in the computation signature")
        parse_shape(sc)
    sc.expect("{", "'{' opening computation %s" % name)
    recs = []
    while not sc.accept("}"):
        if sc.pos >= len(sc.text):
            raise sc.error("computation %s is not closed with '}'" % name)
        recs.append(_parse_instruction(sc))
    thread = ""
    save = sc.pos
    if sc.accept(",") and sc.peek("execution_thread"):
        sc.name()
        sc.expect("=")
        thread = sc.string()
    elif sc.pos != save:
        sc.pos = save
    return name, is_entry, recs, pos, thread


def _topo(sc, name, recs, by_name):
    """Order records operands-first (the text may use operands before it defines them)."""
    order, state = [], {}
    for r in recs:
        if r.name in state:
            continue
        stack = [(r, 0)]
        while stack:
            cur, k = stack.pop()
            if k == 0:
                if state.get(cur.name) == 2:
                    continue
                state[cur.name] = 1
            if k < len(cur.operands):
                stack.append((cur, k + 1))
                oname, opos = cur.operands[k]
                dep = by_name.get(oname)
                if dep is None:
                    line, col = sc.where(opos)
                    raise HloVerifyError("instruction %s uses %s, which is not defined in computation %s "
                                         "(line %d, column %d)" % (cur.name, oname, name, line, col))
                st = state.get(dep.name)
                if st == 1:
                    raise sc.error("instruction %s is part of a cycle" % dep.name, opos)
                if st is None:
                    stack.append((dep, 0))
            else:
                state[cur.name] = 2
                order.append(cur)
    return order


def parse_hlo_text(text, verify=True):
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise HloParseError("HLO text is not valid UTF-8 at byte %d" % e.start) from None
    if not isinstance(text, str):
        raise HloParseError("HLO text must be str or bytes")
    sc = _Scanner(text)
    try:
        module = _parse_module(sc)
    except CompilerError:
        raise
    except RecursionError as e:
        raise sc.error("HLO text nested too deeply") from e
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as e:
        raise sc.error("cannot parse HLO text: %s" % (e,)) from e
    if verify:
        module.verify()
    return module


def _parse_module(sc):
    sc.skip_ws()
    if not sc.accept("HloModule"):
        raise sc.error("HLO text must start with 'HloModule'")
    mname = sc.name("a module name")
    header = {}
    while True:
        save = sc.pos
        sc.skip_ws()
        if not sc.text.startswith(",", sc.pos):
            sc.pos = save
            break
        sc.pos += 1
        key = sc.name("a module attribute")
        sc.expect("=")
        header[key] = sc.raw_value()
    _parse_stack_frames(sc)
    comps = []
    while True:
        sc.skip_ws()
        if sc.pos >= len(sc.text):
            break
        comps.append(_parse_computation(sc))
    if not comps:
        raise sc.error("the HLO module has no computations")
    names = {}
    for cname, _, _, pos, _ in comps:
        if cname in names:
            raise sc.error("computation %s is defined twice" % cname, pos)
        names[cname] = HloComputation(cname)
    entries = [c for c in comps if c[1]]
    if len(entries) > 1:
        raise sc.error("more than one ENTRY computation", entries[1][3])
    entry_name = entries[0][0] if entries else comps[-1][0]

    def comp_ref(name, pos):
        name = name.lstrip("%")
        if name not in names:
            raise sc.error("unknown computation %s" % name, pos)
        return names[name]

    seen = set()
    for cname, _, recs, cpos, thread in comps:
        comp = names[cname]
        comp.execution_thread = thread
        by_name = {}
        for r in recs:
            if r.name in by_name or r.name in seen:
                raise sc.error("instruction name %s is used twice" % r.name, r.pos)
            by_name[r.name] = r
            seen.add(r.name)
        roots = [r for r in recs if r.root]
        if len(roots) > 1:
            raise sc.error("computation %s has more than one ROOT" % cname, roots[1].pos)
        if not recs:
            raise sc.error("computation %s has no instructions" % cname, cpos)
        instrs = {}
        for r in _topo(sc, cname, recs, by_name):
            instr = _build(sc, r, [instrs[o] for o, _ in r.operands], comp_ref)
            instrs[r.name] = instr
            comp.add(instr)
        comp.root = instrs[(roots[0] if roots else recs[-1]).name]
        for r in recs:
            for key, s, e in r.attrs:
                if key == "control-predecessors":
                    sub = _Sub(sc, s, e)
                    sub.expect("{")
                    preds = []
                    while not sub.accept("}"):
                        p = sub.pos
                        nm = sub.name()
                        if nm not in instrs:
                            raise sc.error("unknown control predecessor %s" % nm, p)
                        preds.append(instrs[nm])
                        sub.accept(",")
                    instrs[r.name].control_predecessors = preds
    fattrs, alias = {}, []
    if "frontend_attributes" in header:
        s, e = header["frontend_attributes"]
        fattrs = _key_values(_Sub(sc, s, e))
    if "input_output_alias" in header:
        s, e = header["input_output_alias"]
        for item in _aliasing(_Sub(sc, s, e)):
            kind = item[3] if len(item) > 3 else "may-alias"
            alias.append((item[0], item[1], item[2], kind))
    module = HloModule(mname, [names[c[0]] for c in comps], names[entry_name], frontend_attributes=fattrs,
                       input_output_alias=alias)
    return module


_SECTION = re.compile(r"(FileNames|FunctionNames|FileLocations|StackFrames)\s*\n")


def _parse_stack_frames(sc):
    """The FileNames/FunctionNames/FileLocations/StackFrames sections XLA prints after the header."""
    sections = {}
    while True:
        sc.skip_ws()
        m = _SECTION.match(sc.text, sc.pos)
        if not m:
            break
        sc.pos = m.end()
        entries = {}
        while True:
            sc.skip_ws()
            if not _INT.match(sc.text, sc.pos):
                break
            k = sc.integer()
            entries[k] = sc.string() if sc.peek('"') else _key_values(sc)
        sections[m.group(1)] = entries
    if not sections:
        return
    files = sections.get("FileNames", {})
    locs = sections.get("FileLocations", {})
    for fid, fr in sections.get("StackFrames", {}).items():
        try:
            loc = locs[int(fr["file_location_id"])]
            sc.frames[fid] = (files[int(loc["file_name_id"])], int(loc.get("line", 0)))
        except (KeyError, ValueError, TypeError):
            continue


def _build(sc, r, operands, comp_ref):
    attrs, metadata, fattrs = {}, {}, {}
    called = []
    op = r.opcode
    for key, s, e in r.attrs:
        if key == "control-predecessors" or key in _IGNORED_ATTRS or \
                (key == "algorithm" and op != "rng-bit-generator"):
            continue
        if key not in ("metadata", "frontend_attributes", "true_computation", "false_computation") and \
                key not in allowed_attrs(op):
            raise sc.error("attribute %s is not valid for %s" % (key, op), s - len(key) - 1)
        val = parse_attr(sc, key, s, e, comp_ref)
        if key == "metadata":
            metadata = val
        elif key == "frontend_attributes":
            fattrs = val
        elif key == "calls" and isinstance(val, HloComputation):
            attrs[key] = val
        else:
            attrs[key] = val
    # called computations in XLA's order
    if op == "while":
        for k in ("body", "condition"):
            if k not in attrs:
                raise sc.error("while %s needs %s=" % (r.name, k), r.pos)
        called = [attrs["body"], attrs["condition"]]
    elif op == "select-and-scatter":
        called = [attrs[k] for k in ("select", "scatter") if k in attrs]
    elif op == "conditional":
        if "branch_computations" in attrs:
            called = list(attrs["branch_computations"])
        elif "true_computation" in attrs and "false_computation" in attrs:
            called = [attrs.pop("true_computation"), attrs.pop("false_computation")]
            attrs["branch_computations"] = list(called)
        else:
            raise sc.error("conditional %s needs branch_computations=" % r.name, r.pos)
    elif "to_apply" in attrs:
        called = [attrs.pop("to_apply")]
    elif "calls" in attrs:
        c = attrs.pop("calls")
        called = c if isinstance(c, list) else [c]
    elif "called_computations" in attrs:
        called = list(attrs.pop("called_computations"))
    if op == "custom-call" and "custom_call_target" not in attrs:
        raise sc.error("custom-call %s needs custom_call_target=" % r.name, r.pos)
    if op == "compare" and "direction" not in attrs:
        raise sc.error("compare %s needs direction=" % r.name, r.pos)
    if op == "iota" and "iota_dimension" not in attrs:
        raise sc.error("iota %s needs iota_dimension=" % r.name, r.pos)
    if op == "get-tuple-element" and "index" not in attrs:
        raise sc.error("get-tuple-element %s needs index=" % r.name, r.pos)
    if op == "custom-call" and "api_version" in attrs and attrs["api_version"] == "API_VERSION_UNSPECIFIED":
        attrs["api_version"] = "API_VERSION_ORIGINAL"
    instr = HloInstruction(r.name, op, r.shape, operands, attrs, called, literal=r.literal,
                           parameter_number=r.pnum, metadata=metadata, frontend_attributes=fattrs)
    assign_called_attrs(instr)
    fill_attr_defaults(instr)
    for k, req in (("slice", "slice"), ("pad", "padding"), ("convolution", "dim_labels"),
                   ("dynamic-slice", "dynamic_slice_sizes"), ("gather", "slice_sizes"),
                   ("gather", "index_vector_dim"), ("scatter", "index_vector_dim"),
                   ("reduce-window", "window"), ("select-and-scatter", "window"), ("rng", "distribution")):
        if op == k and req not in instr.attrs:
            raise sc.error("%s %s needs %s=" % (op, r.name, req), r.pos)
    return instr
