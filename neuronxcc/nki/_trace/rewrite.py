"""Control flow on symbolic values: ``if``/``elif``/``else``, ``and``/``or``/``not`` in a kernel's source.

The tracer runs a kernel once, with loop iterators and program ids symbolic, so Python cannot decide
``if i == 0: ... else: ...`` or ``mask=(ix < n and iy < m)``. Before tracing, a kernel function whose
source has an ``if``, an ``and``/``or`` or a ``not`` is recompiled from its own source
(same file, same line numbers, same globals and closure cells) with those constructs routed through
the helpers below (any ``if`` is rewritten, so a symbolic one is checked for return/break/continue):

* ``if T: A else: B`` becomes ``with _nki_if(T) as c: (if c.then(): A) (if c.orelse(): B)``. A
  concrete ``T`` behaves exactly as Python; a symbolic one (a comparison of loop iterators / program
  ids) traces BOTH branches, each under a guard (``T`` and ``not T``). Every instruction traced under
  a guard carries it (``TInst.guard``, a ``Cond``); the lowering splits the loop where the guard
  changes value, as for masks, and drops the instruction where it is false.
* ``a and b`` / ``a or b`` keep Python's short-circuit semantics on concrete values; symbolic operands
  are combined: ``and`` of masks is their conjunction (a mask), ``or`` and ``not`` of loop-iterator
  comparisons are guard formulas.

Refused by name (err_dynamic_control_flow_not_supported) under a symbolic condition: a branch that
returns / breaks / continues (only one path could be traced), and a plain variable assigned in both
branches and read afterwards (both branches run while tracing, so it would silently hold the else
branch's value). Conditions on ``nl.arange`` / ``mgrid`` values (per-element) are masks, not control
flow: err_control_flow_condition_depending_on_arange. Kernels without these constructs, and functions
whose source is not available, run unchanged.
"""
import ast
import builtins
import inspect
import os
import sysconfig
import textwrap
import types

from neuronxcc.nki import errors as E
from neuronxcc.nki._trace.index import Idx, Pred, is_index_var

__all__ = ["rewritten", "Cond", "as_guard"]

_RT = "__nki_rt__"
_CACHE = {}


# -- guard formulas -----------------------------------------------------------------------------
class Cond:
    """A boolean formula over comparisons ``expr op 0`` of loop variables: ('atom', (e, op)) |
    ('and'|'or', [Cond]) | ('not', Cond)."""

    __slots__ = ("kind", "parts")

    def __init__(self, kind, parts):
        self.kind, self.parts = kind, parts

    @staticmethod
    def of(v):
        if isinstance(v, Cond):
            return v
        if isinstance(v, Idx):
            v = v != 0
        return Cond("and", [Cond("atom", a) for a in v.atoms])

    def atoms(self):
        if self.kind == "atom":
            return [self.parts]
        if self.kind == "not":
            return self.parts.atoms()
        return [a for p in self.parts for a in p.atoms()]

    def evaluate(self, atom_value):
        if self.kind == "atom":
            return atom_value(*self.parts)
        if self.kind == "not":
            return not self.parts.evaluate(atom_value)
        vals = (p.evaluate(atom_value) for p in self.parts)
        return all(vals) if self.kind == "and" else any(vals)

    def __repr__(self):
        if self.kind == "atom":
            return "(%s %s 0)" % self.parts
        if self.kind == "not":
            return "not %r" % (self.parts,)
        return "(%s)" % (" %s " % self.kind).join(repr(p) for p in self.parts)


def _symbolic(v):
    if isinstance(v, Cond):
        return True
    if isinstance(v, Pred):
        return not all(e.is_const() for e, _ in v.atoms)
    return isinstance(v, Idx) and not (v.expr.is_const() and not v.shape)


def _check_guard(v):
    """V (symbolic) as a guard Cond; per-element or run-time conditions are refused."""
    c = Cond.of(v)
    names = {x for e, _ in c.atoms() for x in e.free_vars()}
    if any(is_index_var(x) for x in names):
        raise E.err_control_flow_condition_depending_on_arange(
            "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported (use a mask)")
    if any(x.startswith("r_nki") for x in names):
        raise E.err_dynamic_control_flow_not_supported(
            "control flow cannot depend on a value loaded at run time (use nisa.range_select / a mask)")
    return c


def as_guard(v):
    """A Cond given as ``mask=`` (an ``or`` / ``not`` of loop-iterator comparisons) as a guard."""
    return _check_guard(v)


# -- runtime helpers the rewritten code calls ---------------------------------------------------------
class _If:
    def __init__(self, test, jumps, shared):
        self.test, self.jumps, self.shared = test, jumps, shared
        self.sym = _symbolic(test)
        self.pushed = False

    def __enter__(self):
        return self

    def _push(self, cond):
        from neuronxcc.nki._trace.context import current
        ctx = current()
        stack = ctx.__dict__.setdefault("cond_guards", [])
        if self.pushed:
            stack.pop()
        stack.append(cond)
        self.pushed = True

    def _check(self):
        if self.jumps:
            raise E.err_dynamic_control_flow_not_supported(
                "a branch of an if on a loop iterator cannot return/break/continue: the condition is only "
                "known per iteration (guard the instructions instead)")
        if self.shared:
            raise E.err_dynamic_control_flow_not_supported(
                "variable%s %s assigned in both branches of an if/else on a loop iterator and used after it: "
                "both branches are traced, so assign into one tile (t[...] = ...) in each branch instead"
                % ("s" if len(self.shared) > 1 else "", ", ".join("'%s'" % n for n in self.shared)))

    def then(self):
        if not self.sym:
            return bool(self.test)
        self.cond = _check_guard(self.test)
        self._check()
        self._push(self.cond)
        return True

    def orelse(self):
        if not self.sym:
            return not bool(self.test)
        self._push(Cond("not", self.cond))
        return True

    def __exit__(self, *exc):
        if self.pushed:
            from neuronxcc.nki._trace.context import current_or_none
            ctx = current_or_none()
            if ctx is not None and getattr(ctx, "cond_guards", None):
                ctx.cond_guards.pop()
        return False


def _and(*thunks):
    acc, last = None, True
    for th in thunks:
        v = th()
        if _symbolic(v):
            if acc is None:
                acc = v
            elif isinstance(acc, Pred) and isinstance(v, Pred):
                acc = acc & v                    # a conjunction stays a mask
            else:
                acc = Cond("and", [_check_guard(acc), _check_guard(v)])
            continue
        if not v:
            return v
        last = v
    return last if acc is None else acc


def _or(*thunks):
    acc, last = None, False
    for th in thunks:
        v = th()
        if _symbolic(v):
            acc = v if acc is None else Cond("or", [_check_guard(acc), _check_guard(v)])
            continue
        if v:
            return v
        last = v
    return last if acc is None else acc


def _not(v):
    if not _symbolic(v):
        return not v
    if isinstance(v, Pred) and len(v.atoms) == 1:
        return ~v
    return Cond("not", _check_guard(v))


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBS = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})
_USER = {}


def _user_code(code):
    """True for a function written as kernel code: not the tracer's, numpy's or the standard library's
    (our own kernels under nki/kernels and nki/_private_kernels are kernel code)."""
    got = _USER.get(code)
    if got is None:
        fn = os.path.abspath(code.co_filename)
        if fn.startswith(_PKG + os.sep):
            got = E.is_kernel_file(fn)          # our own kernels under nki/kernels and nki/_private_kernels
        else:
            got = not fn.startswith(_LIBS) and not code.co_filename.startswith("<")
        _USER[code] = got
    return got


def _callee(f):
    """What a call in rewritten code calls: a plain kernel-code function (a helper the kernel calls, as the
    original traces helpers inline) is rewritten too, so its if/else on loop iterators traces like the
    kernel's own; everything else (nl / nisa, numpy, builtins, nki.jit kernels) is called as it is."""
    t = type(f)
    if t is types.FunctionType:
        return rewritten(f) if _user_code(f.__code__) else f
    if t is types.MethodType and type(f.__func__) is types.FunctionType and _user_code(f.__func__.__code__):
        return types.MethodType(rewritten(f.__func__), f.__self__)
    return f


_HELPERS = types.SimpleNamespace(if_=_If, and_=_and, or_=_or, not_=_not, call_=_callee)


# -- the source transformation ---------------------------------------------------------------------
def _jumps(stmts):
    """True if STMTS return / break / continue out of the enclosing block (not inside nested loops/defs)."""
    def walk(n, in_loop):
        if isinstance(n, ast.Return):
            return True
        if isinstance(n, (ast.Break, ast.Continue)) and not in_loop:
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        loop = in_loop or isinstance(n, (ast.For, ast.While, ast.AsyncFor))
        orelse = n.orelse if loop and not in_loop and isinstance(getattr(n, "orelse", None), list) else ()
        return any(walk(c, in_loop if any(c is o for o in orelse) else loop) for c in ast.iter_child_nodes(n))
    return any(walk(s, False) for s in stmts)


def _bound(stmts):
    names = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


class _Rewriter(ast.NodeTransformer):
    def __init__(self, fdef):
        self.n = 0
        self.loads = [(n.id, n.lineno) for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        self.loops = [n for n in ast.walk(fdef) if isinstance(n, (ast.For, ast.While))]

    def _rt(self, attr, node):
        return ast.copy_location(ast.Attribute(ast.Name(_RT, ast.Load()), attr, ast.Load()), node)

    def _read_after(self, node):
        end = node.end_lineno or node.lineno
        names = {n for n, ln in self.loads if ln > end}
        for lp in self.loops:              # a value carried to the next iteration of an enclosing loop
            if lp.lineno < node.lineno <= (lp.end_lineno or lp.lineno):
                names |= {n for n, ln in self.loads if lp.lineno <= ln <= (lp.end_lineno or lp.lineno)
                          and not node.lineno <= ln <= end}
        return names

    def visit_If(self, node):
        shared = sorted(_bound(node.body) & _bound(node.orelse) & self._read_after(node)) if node.orelse else []
        jumps = _jumps(node.body) or _jumps(node.orelse)
        self.generic_visit(node)
        var = "__nki_c%d" % self.n
        self.n += 1
        call = ast.Call(self._rt("if_", node), [node.test, ast.Constant(jumps), ast.Constant(tuple(shared))], [])
        then = ast.If(ast.Call(ast.Attribute(ast.Name(var, ast.Load()), "then", ast.Load()), [], []),
                      node.body, [])
        body = [then]
        if node.orelse:
            body.append(ast.If(ast.Call(ast.Attribute(ast.Name(var, ast.Load()), "orelse", ast.Load()), [], []),
                               node.orelse, []))
        w = ast.With([ast.withitem(call, ast.Name(var, ast.Store()))], body)
        for n in [w, call, then] + body:
            ast.copy_location(n, node)
        return ast.fix_missing_locations(w)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        thunks = [ast.copy_location(ast.Lambda(ast.arguments([], [], None, [], [], None, []), v), v)
                  for v in node.values]
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.fix_missing_locations(ast.copy_location(ast.Call(self._rt(fn, node), thunks, []), node))

    def visit_Call(self, node):
        self.generic_visit(node)
        if _plain_call(node):
            node.func = ast.copy_location(ast.Call(self._rt("call_", node), [node.func], []), node.func)
        return ast.fix_missing_locations(node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.fix_missing_locations(ast.copy_location(ast.Call(self._rt("not_", node), [node.operand], []),
                                                           node))


def _plain_call(node):
    """A call that may reach a helper function (not a builtin such as range / len / super)."""
    f = node.func
    if isinstance(f, ast.Name):
        return not hasattr(builtins, f.id) and f.id != _RT
    return isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == _RT)


def _needs(fdef):
    for n in ast.walk(fdef):
        if isinstance(n, (ast.If, ast.BoolOp)) or \
                isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) or \
                isinstance(n, ast.Call) and _plain_call(n):
            return True
    return False


def _compile(func):
    code = func.__code__
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != code.co_name:
        return None
    fdef = tree.body[0]
    if not _needs(fdef):
        return None
    fdef.decorator_list = []
    ast.increment_lineno(tree, first - 1)
    fdef = _Rewriter(fdef).visit(fdef)
    free = list(code.co_freevars)
    outer = ast.FunctionDef("__nki_outer__", ast.arguments([], [ast.arg(n) for n in [_RT] + free], None, [], [],
                                                           None, []),
                            [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))], [], None)
    mod = ast.Module([ast.copy_location(outer, fdef)], [])
    ast.fix_missing_locations(mod)
    try:
        mcode = compile(mod, code.co_filename, "exec")
    except SyntaxError:
        return None
    ocode = next(c for c in mcode.co_consts if isinstance(c, types.CodeType))
    return next(c for c in ocode.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name)


def rewritten(func):
    """FUNC, recompiled with symbolic control flow routed through the helpers (see module doc); FUNC
    itself when it has none of those constructs or its source is not available."""
    code = getattr(func, "__code__", None)
    if code is None:
        return func
    if code not in _CACHE:
        _CACHE[code] = _compile(func)
    new = _CACHE[code]
    if new is None:
        return func
    cells = dict(zip(code.co_freevars, func.__closure__ or ()))
    closure = tuple(cells[n] if n in cells else types.CellType(_HELPERS) for n in new.co_freevars)
    f = types.FunctionType(new, func.__globals__, func.__name__, func.__defaults__, closure)
    f.__kwdefaults__ = func.__kwdefaults__
    f.__dict__.update(getattr(func, "__dict__", {}))
    f.__wrapped__ = func
    return f
