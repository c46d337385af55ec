"""``nl.loop_reduce`` and ``nl.all_reduce``.

``b = nl.loop_reduce(a, op, loop_indices=[k])``: the destination tile is also the right operand of
``op`` (the original's documented equivalence: ``b = nisa.tensor_tensor(data1=b, data2=a, op=op)``
accumulating in place across the loop). The destination is the tile the call's result is assigned
to: the tracer reads the assignment target at the kernel's call line and the value that name holds
when the call runs (or, for ``view[idx] = nl.loop_reduce(...)``, the view that subscript selects),
accumulates into that tile (VectorE, fp32 ALU, cast on write) and returns it.

``nl.all_reduce(x, op, program_axes)`` reduces ``x`` over the SPMD programs along ``program_axes``:
over a single program (no grid, or size-1 axes) the reduction is the value itself (cast to ``dtype``);
over more, the grid is cut at the call (``_trace.spmd``): every program's value is stored, reduced
once per group of programs, and each program continues with its group's result.
"""
import ast
import linecache

from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.context import current
from neuronxcc.nki._trace.elementwise import op_name
from neuronxcc.nki._trace.movement import copy
from neuronxcc.nki._trace.tensor import Tensor

__all__ = ["loop_reduce", "all_reduce"]

_ASSIGNS = {}


def _assignments(filename):
    """[(first line, last line, target)] of every ``t = <call>`` / ``t: T = <call>`` in FILENAME; the target
    is a name (str) or, for ``view[idx] = <call>``, the compiled subscript expression (code, source text)."""
    got = _ASSIGNS.get(filename)
    if got is None:
        got = []
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except SyntaxError:
            tree = None
        for n in ast.walk(tree) if tree is not None else ():
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if len(targets) != 1:
                    continue
                t = targets[0]
                if isinstance(t, ast.Name):
                    target = t.id
                elif isinstance(t, ast.Subscript):
                    text = ast.unparse(t)
                    target = (compile(text, filename, "eval"), text)
                else:
                    continue
                got.append((n.value.lineno, n.value.end_lineno or n.value.lineno, target))
        _ASSIGNS[filename] = got
    return got


def _destination():
    """The tile the calling kernel line assigns the result to: a name's current tile, or the view a
    subscripted target selects (evaluated in the kernel's frame, as the assignment will index it)."""
    f = E.kernel_frame()
    if f is not None:
        line = f.f_lineno
        cands = [(a, b, i, t) for i, (a, b, t) in enumerate(_assignments(f.f_code.co_filename)) if a <= line <= b]
        if cands:
            target = max(cands)[3]
            if not isinstance(target, str):
                code, text = target
                v = eval(code, f.f_globals, f.f_locals)
                if isinstance(v, Tensor):
                    return v, True
                raise E.err_invalid_argument("nl.loop_reduce accumulates into the tile its result is assigned "
                                             "to, but '%s' is no on-chip tile" % text)
            v = f.f_locals.get(target)
            if isinstance(v, Tensor):
                return v, False
            raise E.err_invalid_argument(
                "nl.loop_reduce accumulates into the tile its result is assigned to, but '%s' holds no tile yet "
                "(create it first, e.g. %s = nl.zeros(...))" % (target, target))
    raise E.err_invalid_argument("nl.loop_reduce accumulates into the tile its result is assigned to: write "
                                 "'b = nl.loop_reduce(a, op=..., loop_indices=[...])' with b an existing tile")


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    """dst = dst op x, dst being the tile the result is assigned to (see module doc); returns dst."""
    ops.tile_operand(x, "loop_reduce", "x")
    dst, view = _destination()
    ops.tile_operand(dst, "loop_reduce", "dst")
    if not isinstance(loop_indices, (list, tuple)):
        loop_indices = [loop_indices]
    for i in loop_indices:
        if not (isinstance(i, int) or type(i).__name__ == "Idx"):
            raise E.err_invalid_argument("loop_indices of nl.loop_reduce are loop iterators or integers, got %r"
                                         % (i,))
    if x.shape[0] != dst.shape[0]:
        raise E.err_num_partition_mismatch("loop_reduce: %s and its destination %s differ in partitions"
                                           % (list(x.shape), list(dst.shape)))
    alu = op_name(op, "alu")
    ops.emit("tensor_tensor", "DVE", [dst], [dst, ops.expand(x, dst.shape)], {"op": alu}, mask)
    if view:
        dst._updated = True             # the assignment 'view[idx] = <this>' then writes nothing more
    return dst


def all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True, asynchronous=False, **kwargs):
    """x reduced over the SPMD programs along PROGRAM_AXES (see module doc)."""
    ops.tile_operand(x, "all_reduce", "x")
    alu = op_name(op, "alu")
    axes = [program_axes] if isinstance(program_axes, int) else list(program_axes)
    grid = current().grid
    n = 1
    for a in axes:
        if not isinstance(a, int) or a < 0:
            raise E.err_invalid_argument("program_axes of nl.all_reduce are grid axis numbers, got %r" % (a,))
        n *= grid[a] if a < len(grid) else 1
    if n > 1:
        if mask is not None:
            raise E.err_invalid_argument("nl.all_reduce over several programs takes no mask")
        from neuronxcc.nki._trace.spmd import all_reduce_programs
        return all_reduce_programs(x, alu, [a for a in axes if a < len(grid)], dtype or x.dtype,
                                   E.kernel_location())
    return copy(x, dtype=dtype or x.dtype, mask=mask)
