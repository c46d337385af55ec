"""A small text printer for BIR modules (debugging and logs; not parsed back)."""

__all__ = ["format_module", "format_node", "format_ap"]


def format_ap(ap):
    pat = ",".join("[%d,%d]" % (s, n) for s, n in ap.pattern)
    if ap.num_partitions is None:
        return "%s:%s{%s}+(%s)" % (ap.target, ap.dtype, pat, ap.offset)
    return "%s:%s[%d:%d]{%s}+(%s)" % (ap.target, ap.dtype, ap.start_partition, ap.start_partition + ap.num_partitions,
                                      pat, ap.offset)


def _fmt_inst(n):
    s = "#%s %s.%s %s <- %s" % (n.id, n.engine, n.opcode, ", ".join(format_ap(a) for a in n.dsts),
                                  ", ".join(format_ap(a) for a in n.srcs))
    if n.attrs:
        s += " " + " ".join("%s=%s" % (k, v) for k, v in sorted(n.attrs.items()))
    if n.waits:
        s += " wait(" + ", ".join("%s>=%s" % (k, v) for k, v in n.waits) + ")"
    if n.signals:
        s += " signal(" + ", ".join("%s+=%d" % (k, v) for k, v in n.signals) + ")"
    if n.name:
        s += "  ; " + str(n.name)
    return s


def format_node(n, indent=0):
    pad = "  " * indent
    if n.kind == "inst":
        return [pad + _fmt_inst(n)]
    if n.kind == "loop":
        lines = [pad + "#%s for %s in range(%d, %d, %d):" % (n.id, n.var, n.start, n.stop, n.step)]
        for c in n.body:
            lines += format_node(c, indent + 1)
        return lines
    if n.kind == "while":
        lines = [pad + "#%s while %s:" % (n.id, n.cond)]
        for c in n.body:
            lines += format_node(c, indent + 1)
        return lines
    lines = [pad + "#%s if %s:" % (n.id, n.cond)]
    for c in n.then_body:
        lines += format_node(c, indent + 1)
    lines.append(pad + "else:")
    for c in n.else_body:
        lines += format_node(c, indent + 1)
    return lines


def format_module(m):
    lines = ["module %s target=%s" % (m.name, m.target)]
    for t in m.tensors.values():
        addr = "" if t.arena_offset is None else " @arena+%d" % t.arena_offset
        lines.append("  tensor %s %s %s%s%s" % (t.name, t.kind, t.dtype, list(t.shape), addr))
    for x in m.memlocs.values():
        addr = "" if not x.allocated else " @p%d+%d" % (x.start_partition, x.byte_offset)
        lines.append("  memloc %s %s %dx%dB%s" % (x.name, x.memory, x.partitions, x.bytes_per_partition, addr))
    for n in m.body:
        lines += format_node(n, 1)
    return "\n".join(lines) + "\n"
