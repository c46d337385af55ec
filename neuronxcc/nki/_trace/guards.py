"""``if`` on loop iterators: ``if i < n_tiles: ...`` inside ``affine_range`` (no ``else``).

The tracer runs the kernel once, so the condition cannot be decided in Python. Instead the comparison
(a ``Pred`` over loop iterators / program ids) answers True and becomes a *guard*: every instruction
traced while the kernel's frame is inside that ``if`` block gets it as an extra mask atom, and the
lowering drops the instruction on the iterations where it is false (splitting the loop, as for masks).
The block's line range comes from the kernel's source (``ast``). This serves functions ``rewrite``
cannot recompile (no source, or called from library code); the kernel, nki.jit / nki.trace sub-kernels
and the plain helpers they call are recompiled by ``rewrite`` (which also traces ``else`` / ``elif``);
an ``if`` with an ``else`` reaching this path is refused.
"""
import ast
import linecache
import sys

from neuronxcc.nki import errors as E

_IFS = {}


def _ifs_of(filename):
    got = _IFS.get(filename)
    if got is None:
        src = "".join(linecache.getlines(filename))
        try:
            tree = ast.parse(src)
            got = [n for n in ast.walk(tree) if isinstance(n, ast.If)]
        except SyntaxError:
            got = []
        _IFS[filename] = got
    return got


def add_guard(ctx, pred):
    """Record PRED as a guard of the ``if`` block being entered; returns True (enter it)."""
    f = E.kernel_frame()
    if f is None:
        raise E.err_dynamic_control_flow_not_supported("control flow cannot depend on a loop iterator here")
    line = f.f_lineno
    cands = [n for n in _ifs_of(f.f_code.co_filename) if n.test.lineno <= line <= (n.test.end_lineno or line)]
    if not cands:
        raise E.err_dynamic_control_flow_not_supported(
            "control flow cannot depend on a loop iterator inside affine_range/sequential_range "
            "(use static_range, or a mask)")
    node = max(cands, key=lambda n: n.test.lineno)
    if node.orelse:
        raise E.err_dynamic_control_flow_not_supported(
            "an if/else on a loop iterator is traced in kernel code whose source is available (the kernel and "
            "the helpers it calls); this function is reached another way: decorate it with @nki.trace (or use "
            "an if without else, or masks)")
    start = node.body[0].lineno
    end = max(getattr(n, "end_lineno", n.lineno) for n in node.body)
    ctx.__dict__.setdefault("guards", []).append((f, start, end, pred))
    return True


def active_guard_atoms(ctx):
    """The mask atoms of the guards whose ``if`` block the kernel is executing now."""
    gs = getattr(ctx, "guards", None)
    if not gs:
        return []
    stack = set()
    f = sys._getframe(1)
    while f is not None:
        stack.add(id(f))
        f = f.f_back
    atoms, keep = [], []
    for g in gs:
        fr, start, end, pred = g
        if id(fr) in stack and start <= fr.f_lineno <= end:
            atoms.extend(pred.atoms)
            keep.append(g)
        elif id(fr) in stack and fr.f_lineno < start:
            keep.append(g)          # still evaluating the condition (e.g. `a and b`)
    ctx.guards = keep
    return atoms
