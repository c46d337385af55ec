"""Lexical layer of the HLO text reader: a position-tracking scanner, shapes and literals.

``Scanner`` reads the whole text and reports errors as HloParseError with
line and column; ``SubScanner`` scans one attribute value in place (positions stay
those of the whole text). ``parse_shape`` reads array/tuple/token shapes with
layouts (tiles and memory spaces are skipped) and dynamic ``<=`` bounds;
``parse_literal`` reads constants (scalars, nested arrays, tuples, inf/nan)
for a known shape, tokenising large arrays at C speed.
"""
import bisect
import re

import numpy as np

from neuronxcc.common.dtypes import NAN_PAYLOAD_BITS
from neuronxcc.errors import HloParseError, HloVerifyError
from neuronxcc.hlo.model import ARRAY_TYPES, ELEMENT_TYPES, Shape, check_literal_size, dtype_of

_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-%$]+")
OPCODE_RE = re.compile(r"[a-z][a-z0-9\-]*")
INT_RE = re.compile(r"[-+]?\d+")
_WS = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)+", re.S)
_NUMBER_TOKEN = re.compile(r"-?nan(?:\(0x[0-9a-fA-F]+\))?|[-+]?inf|true|false|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_LITERAL_PUNCT = re.compile(r'[{}()="]')
_NAN_PAYLOAD = re.compile(r"nan\(0x[0-9a-fA-F]+\)")
# a body of plain decimal numbers (the common case) needs no per-token check
_NUMBERS_ONLY = re.compile(r"[\s{},0-9.eE+\-]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v"}



class Scanner:
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
        m = INT_RE.match(self.text, self.pos)
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



def _in_nan_payload(text, at):
    """Is the parenthesis at ``at`` part of a nan(0x...) token?"""
    start = text.rfind("nan(", max(0, at - 40), at + 1)
    m = _NAN_PAYLOAD.match(text, start) if start >= 0 else None
    return m is not None and m.start() <= at < m.end()


def _set_nan_payloads(out, tokens, mbits):
    """Give the NaNs written nan(0x...) their payload bits (the mantissa, quiet bit included)."""
    u = out.view("u%d" % out.dtype.itemsize)
    for k, t in enumerate(tokens):
        if "nan(" not in t:
            continue
        payload = int(t[t.index("(0x") + 3:-1], 16) & ((1 << mbits) - 1)
        if payload == 0:
            continue  # all-zero mantissa would be infinity
        top = u.dtype.type(u[k] >> mbits << mbits)  # sign and all-ones exponent
        u[k] = top | u.dtype.type(payload)


def _convert_values(sc, tokens, shape, pos, maybe_neg_nan=True, maybe_payload=False):
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
            info = _int_info(dt)
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
            out = floats.astype(dt)
        if et in NAN_PAYLOAD_BITS and maybe_payload:
            _set_nan_payloads(out, tokens, NAN_PAYLOAD_BITS[et])
        return out.reshape(shape.dims)
    except (ValueError, OverflowError) as e:
        raise sc.error("bad constant value for %s: %s" % (et, e), pos) from None


def _int_info(dt):
    """iinfo for numpy's integers and ml_dtypes' narrow ones (s4, u4, s2, u2)."""
    if dt.kind in "iu":
        return np.iinfo(dt)
    import ml_dtypes
    return ml_dtypes.iinfo(dt)


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
        depth2, deepest, i = 0, 0, None
        for m in _LITERAL_PUNCT.finditer(sc.text, sc.pos):  # numbers between braces are skipped in C
            ch = m.group(0)
            if ch in "()" and _in_nan_payload(sc.text, m.start()):
                continue  # nan(0x...) payload
            if ch == "{":
                depth2 += 1
                deepest = max(deepest, depth2)
            elif ch == "}":
                depth2 -= 1
                if depth2 == 0:
                    i = m.start()
                    break
            else:
                raise sc.error("unexpected %r in an array constant" % ch, m.start())
        if i is None:
            raise sc.error("unbalanced braces in constant", start)
        # as XLA's parser: one level of braces per dimension, down to the first zero-size one
        zero = [k for k, d in enumerate(shape.dims) if d == 0]
        want = zero[0] + 1 if zero else shape.rank
        if deepest != want:
            raise sc.error("constant of shape %s needs %d levels of braces, not %d"
                           % (shape.to_text(False), want, deepest), start)
        body = sc.text[sc.pos:i + 1]
        sc.pos = i + 1
        tokens = body.replace("{", " ").replace("}", " ").replace(",", " ").split()
        maybe_neg_nan = "-n" in body
        maybe_payload = "nan(" in body
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
        maybe_payload = "nan(" in tokens[0]
        if shape.numel() != 1 and shape.numel() > 0:
            # XLA accepts a scalar broadcast to the shape only for rank-0; a splat is an error here
            raise sc.error("constant of shape %s needs an array value {...}" % shape.to_text(False), start)
    return _convert_values(sc, tokens, shape, start, maybe_neg_nan, maybe_payload)


class SubScanner(Scanner):
    """A scanner restricted to [start, end) of the parent text (positions stay global)."""

    def __init__(self, parent, start, end):
        self.text = parent.text[:end]
        self.pos = start
        self._lines = parent._lines
        self.frames = parent.frames



def skip_balanced(sc):
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
