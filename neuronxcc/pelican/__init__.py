"""pelican: symbolic integer index/address algebra (typed Cython).

Expressions over named variables (loop variables and sequencer registers)
with ``+``, ``-``, ``*`` by integer constants, ``//`` and ``%`` by positive
integer constants (Python floor semantics: -7 // 2 == -4, -7 % 2 == 1),
``min_`` and ``max_``. Every expression is kept in a canonical form at
construction, so ``==`` compares canonical structure (a bool) and ``hash``
agrees with it; a constant compares and hashes like its int::

    from neuronxcc.pelican import Expr, var, const, parse, min_, max_
    i, j = var("i"), var("j")
    e = i * 128 + j // 4 - 3
    e.subs({"i": 2, "j": var("k") + 1})      # ints or Exprs, canonical result
    e.eval({"i": 2, "j": 5})                 # -> 254
    e.affine()                               # ({'i': 128}, ...) or None (here None: j//4)
    e.bounds({"i": (0, 7), "j": (0, 3)})     # inclusive (lo, hi); None = unbounded side
    e.simplify({"j": (0, 3)})                # range rules: j//4 -> 0  => 128*i - 3
    parse(str(e)) == e; Expr.from_json(e.to_json()) == e

Canonical rules (valid for all integers): constants folded; sums flattened to
``c0 + sum(c_i*atom_i)`` over atoms sorted canonically, like terms merged;
``(k*x + y)//k -> x + y//k``, ``(k*x + y)%k -> y%k``, constants of a
``//``/``%`` dividend reduced into [0, k); common factors cancelled
(``(2x)//4 -> x//2``, ``(2x)%4 -> 2*(x%2)``); ``(x//a)//b -> x//(a*b)``;
``(x%(a*b))%b -> x%b``; ``(x%(a*b))//a -> (x//a)%b``;
``k*(y//k) + y%k -> y``; ``x//1 -> x``, ``x%1 -> 0``; nested min/max
flattened, constants folded, operands that another always beats dropped.
Intrinsic bounds (``x%k`` in [0, k-1]) decide ``//``, ``%``, min and max
when they can. ``simplify(ranges)`` adds the rules that hold for variables
in the given ranges.

Fast evaluation: ``e.compile(var_order)`` returns a ``CompiledExpr``
(``neuronxcc.pelican._compiled``); from Cython,
``from neuronxcc.pelican._compiled cimport CompiledExpr`` and call
``ce.eval_ptr(const int64_t*)`` or ``ce.eval_vec(const int64_t[::1])``
(``noexcept nogil``), or ``ce.eval_rows(values, nrows, stride, out)`` for
a batch (``nogil``, column-wise over chunks). Affine expressions evaluate as
``ce.constant + dot(ce.coeffs, values)`` (``ce.is_affine``); ``ce(values)``
and ``ce.eval_many(rows)`` are the Python entry points. ``//`` and ``%`` by
powers of two compile to shifts and masks.

Modules: ``_expr`` (the node type, its operators, ``subs``, ``var`` ...),
``_canon`` (node makers, canonical order, the rewrite rules the operators call),
``_walks`` (eval, bounds, free variables, text form, ``simplify(ranges)``),
``_parse`` (text -> Expr), ``_compiled`` (``CompiledExpr``), and the inline
headers ``_intmath.pxd`` / ``_interval.pxd``.

Limits: int64 everywhere (construction raises OverflowError; the compiled
path wraps); products of two non-constant expressions raise ValueError;
tree walks are C recursion, so nesting depth (not size) should stay in the
thousands; canonical forms are unique for affine expressions, while equal
values of nested non-linear terms may keep different (valid) forms.
"""
from neuronxcc.pelican._compiled import CompiledExpr
from neuronxcc.pelican._expr import Expr, as_expr, const, max_, min_, var
from neuronxcc.pelican._parse import parse

__all__ = ["Expr", "CompiledExpr", "var", "const", "as_expr", "parse", "min_", "max_"]
