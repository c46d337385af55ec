"""Structural comparison of two modules (used by tests and tools).

``diff_modules(a, b)`` lists the differences between two models: the same
computations, instructions (by name), opcodes, shapes with layouts, operand
names, attributes (computations compared by name), literals bit for bit
(NaN payloads included), parameter numbers, frontend attributes and, unless
``metadata=False``, metadata. An empty list means the modules are equal.
"""
import numpy as np


def _norm(v):
    if hasattr(v, "instructions") and hasattr(v, "root"):
        return ("computation", v.name)
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return tuple(_norm(x) for x in v)
    return v


def literal_key(lit):
    """A hashable key equal for bit-identical literals (dtype, shape, bytes; tuples nest)."""
    if lit is None:
        return None
    if isinstance(lit, tuple):
        return tuple(literal_key(x) for x in lit)
    a = np.asarray(lit)
    return (str(a.dtype), a.shape, a.tobytes())


def diff_instructions(x, y, metadata=True):
    d = []
    where = x.name
    if x.opcode != y.opcode:
        d.append("%s: opcode %s vs %s" % (where, x.opcode, y.opcode))
    if x.shape != y.shape:
        d.append("%s: shape %s vs %s" % (where, x.shape, y.shape))
    if [o.name for o in x.operands] != [o.name for o in y.operands]:
        d.append("%s: operands %s vs %s" % (where, [o.name for o in x.operands], [o.name for o in y.operands]))
    ax = {k: _norm(v) for k, v in x.attrs.items()}
    ay = {k: _norm(v) for k, v in y.attrs.items()}
    if ax != ay:
        keys = sorted(set(ax) | set(ay))
        diffs = ["%s: %r vs %r" % (k, ax.get(k), ay.get(k)) for k in keys if ax.get(k) != ay.get(k)]
        d.append("%s: attrs differ: %s" % (where, "; ".join(diffs)))
    if [c.name for c in x.called_computations] != [c.name for c in y.called_computations]:
        d.append("%s: called computations differ" % where)
    if literal_key(x.literal) != literal_key(y.literal):
        d.append("%s: literal %r vs %r" % (where, x.literal, y.literal))
    if x.parameter_number != y.parameter_number:
        d.append("%s: parameter_number %s vs %s" % (where, x.parameter_number, y.parameter_number))
    if x.frontend_attributes != y.frontend_attributes:
        d.append("%s: frontend_attributes %s vs %s" % (where, x.frontend_attributes, y.frontend_attributes))
    if metadata and x.metadata != y.metadata:
        d.append("%s: metadata %s vs %s" % (where, x.metadata, y.metadata))
    if [p.name for p in x.control_predecessors] != [p.name for p in y.control_predecessors]:
        d.append("%s: control predecessors differ" % where)
    return d


def diff_modules(a, b, metadata=True):
    d = []
    if a.name != b.name:
        d.append("module name %s vs %s" % (a.name, b.name))
    if a.entry.name != b.entry.name:
        d.append("entry %s vs %s" % (a.entry.name, b.entry.name))
    if a.frontend_attributes != b.frontend_attributes:
        d.append("module frontend_attributes %s vs %s" % (a.frontend_attributes, b.frontend_attributes))
    if sorted(a.computations) != sorted(b.computations):
        d.append("computations %s vs %s" % (sorted(a.computations), sorted(b.computations)))
        return d
    for name, ca in a.computations.items():
        cb = b.computations[name]
        ia = {i.name: i for i in ca.instructions}
        ib = {i.name: i for i in cb.instructions}
        if set(ia) != set(ib):
            d.append("%s: instructions %s vs %s" % (name, sorted(set(ia) - set(ib)), sorted(set(ib) - set(ia))))
            continue
        if ca.root.name != cb.root.name:
            d.append("%s: root %s vs %s" % (name, ca.root.name, cb.root.name))
        for k in ia:
            d.extend(diff_instructions(ia[k], ib[k], metadata))
    return d
