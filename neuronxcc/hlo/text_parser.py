"""HLO text -> the module model.

Reads the text XLA prints (``HloModule::ToString``) as JAX and torch-xla emit
it: module header attributes (entry_computation_layout, frontend_attributes,
input_output_alias, ...), computations with or without ``%`` sigils and
program-shape headers, ``ROOT``, operands with or without their shapes,
layouts (tiles and memory spaces are skipped), constants (scalars, nested
arrays, tuples, inf/nan; see text_scan) and every attribute form (text_attrs).
Instructions may refer to operands defined later in their computation; the
model lists them operands-first. Every failure is an HloParseError carrying
the line and column of the offending text.
"""
import re

from neuronxcc.errors import CompilerError, HloParseError, HloVerifyError
from neuronxcc.hlo.proto_io import allowed_attrs
from neuronxcc.hlo.model import HloComputation, HloInstruction, HloModule, assign_called_attrs, fill_attr_defaults
from neuronxcc.hlo.text_scan import INT_RE, OPCODE_RE, Scanner, SubScanner, skip_balanced, parse_literal, parse_shape
from neuronxcc.hlo.text_attrs import IGNORED_ATTRS, parse_aliasing, key_values, parse_attr
from neuronxcc.hlo.model import ELEMENT_TYPES

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
    m = OPCODE_RE.match(sc.text, sc.pos)
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
        key = _next_attribute(sc, "an attribute name")
        if key is None:
            break
        start, end = sc.raw_value()
        if start == end:
            if key != "padding":
                raise sc.error("attribute %s has no value" % key, start)
        rec.attrs.append((key, start, end))
    return rec


def _next_attribute(sc, what):
    """After ``, key=``: the key (the scanner at its value); None (scanner unmoved) when no comma follows."""
    save = sc.pos
    sc.skip_ws()
    if not sc.text.startswith(",", sc.pos):
        sc.pos = save
        return None
    sc.pos += 1
    key = sc.name(what)
    sc.expect("=", "'=' after attribute %s" % key)
    return key


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
        skip_balanced(sc)
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


HEADERLESS_MODULE_NAME = "module"   # the name a module without an ``HloModule`` line gets


def parse_hlo_text(text, verify=True):
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise HloParseError("HLO text is not valid UTF-8 at byte %d" % e.start) from None
    if not isinstance(text, str):
        raise HloParseError("HLO text must be str or bytes")
    if text.startswith("\ufeff"):
        text = text[1:]
    sc = Scanner(text)
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
    header = {}
    if sc.accept("HloModule"):
        mname = sc.name("a module name")
        while True:
            key = _next_attribute(sc, "a module attribute")
            if key is None:
                break
            header[key] = sc.raw_value()
        _parse_stack_frames(sc)
    else:
        # like XLA's parser, a module without its header line: computations only
        mname = HEADERLESS_MODULE_NAME
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

    # Names are scoped per computation; like XLA's parser, a name an earlier computation
    # already used is made unique module-wide with a ".N" suffix (b -> b.1).
    taken = {r.name for c in comps for r in c[2]}
    used = set()
    for cname, _, recs, cpos, thread in comps:
        comp = names[cname]
        comp.execution_thread = thread
        by_name = {}
        renamed = {}
        for r in recs:
            if r.name in by_name:
                raise sc.error("instruction name %s is used twice in computation %s" % (r.name, cname), r.pos)
            by_name[r.name] = r
            if r.name in used:
                k = 1
                while "%s.%d" % (r.name, k) in taken:
                    k += 1
                renamed[r.name] = "%s.%d" % (r.name, k)
                taken.add(renamed[r.name])
            used.add(renamed.get(r.name, r.name))
        roots = [r for r in recs if r.root]
        if len(roots) > 1:
            raise sc.error("computation %s has more than one ROOT" % cname, roots[1].pos)
        if not recs:
            raise sc.error("computation %s has no instructions" % cname, cpos)
        instrs = {}
        for r in _topo(sc, cname, recs, by_name):
            instr = _build(sc, r, [instrs[o] for o, _ in r.operands], comp_ref)
            instrs[r.name] = instr
            if r.name in renamed:
                instr.name = renamed[r.name]
            comp.add(instr)
        comp.root = instrs[(roots[0] if roots else recs[-1]).name]
        for r in recs:
            for key, s, e in r.attrs:
                if key == "control-predecessors":
                    sub = SubScanner(sc, s, e)
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
        fattrs = key_values(SubScanner(sc, s, e))
    if "input_output_alias" in header:
        s, e = header["input_output_alias"]
        for item in parse_aliasing(SubScanner(sc, s, e)):
            kind = item[3] if len(item) > 3 else "may-alias"
            alias.append((item[0], item[1], item[2], kind))
    counts = {}
    for key in ("replica_count", "num_partitions"):
        if key in header:
            s, e = header[key]
            txt = sc.text[s:e].strip()
            if not txt.isdigit() or int(txt) < 1:
                raise sc.error("%s must be a positive integer, got %r" % (key, txt), s)
            counts[key] = int(txt)
    module = HloModule(mname, [names[c[0]] for c in comps], names[entry_name], frontend_attributes=fattrs,
                       input_output_alias=alias, **counts)
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
            if not INT_RE.match(sc.text, sc.pos):
                break
            k = sc.integer()
            entries[k] = sc.string() if sc.peek('"') else key_values(sc)
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
        if key == "control-predecessors" or key in IGNORED_ATTRS or \
                (key == "algorithm" and op != "rng-bit-generator"):
            continue
        if key not in ("metadata", "frontend_attributes", "true_computation", "false_computation") and \
                key not in allowed_attrs(op):
            raise sc.error("attribute %s is not valid for %s" % (key, op), s - len(key) - 1)
        val = parse_attr(sc, key, s, e, comp_ref)
        if key in ("replica_groups", "source_target_pairs") and not val:
            continue  # empty is the default (the proto form cannot tell them apart)
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
