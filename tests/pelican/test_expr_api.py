"""pelican API: documented examples, canonical forms, errors, compiled path."""
import numpy as np
import pytest

from neuronxcc.pelican import CompiledExpr, Expr, as_expr, const, max_, min_, parse, var

x, y, z, i, j, k = (var(n) for n in "xyzijk")


def test_interfaces_example():
    e = var("i") * 128 + var("j") // 4 - 3
    assert str(e) == "128*i + j//4 - 3"
    assert e.simplify() == e
    assert e.subs({"i": 2, "j": var("k") + 1}) == (k + 1) // 4 + 253
    assert e.eval({"i": 2, "j": 5}) == 254
    assert e.affine() is None
    assert (i * 128 + j * 4 - 3).affine() == ({"i": 128, "j": 4}, -3)
    assert e.bounds({"i": (0, 7), "j": (0, 3)}) == (-3, 893)
    assert e.free_vars() == frozenset({"i", "j"})
    assert not e.is_const() and const(5).is_const() and int(const(5)) == 5
    assert parse(str(e)) == e
    assert Expr.from_json(e.to_json()) == e


def test_floor_semantics():
    assert const(-7) // 2 == -4 and const(-7) % 2 == 1
    assert (x // 2).eval({"x": -7}) == -4 and (x % 2).eval({"x": -7}) == 1
    assert -7 // const(2) == -4 and -7 % const(2) == 1


@pytest.mark.parametrize("a, b", [
    (x + y, y + x),
    (2 * x - x, x),
    (x + y - x, y),
    ((4 * x + 2) // 2, 2 * x + 1),
    ((8 * x + y + 5) // 4, 2 * x + (y + 1) // 4 + 1),
    ((8 * x + y + 5) % 4, (y + 1) % 4),
    ((x % 8) % 4, x % 4),
    ((x // 2) // 3, x // 6),
    ((x * 4) % 4, const(0)),
    ((2 * x) // 4, x // 2),
    ((2 * x) % 4, 2 * (x % 2)),
    ((x % 8) // 2, (x // 2) % 4),
    (4 * (x // 4) + x % 4, x),
    ((x % 4) // 4, const(0)),
    (min_(x, x + 1, 7, 5), min_(x, 5)),
    (max_(x % 4, 3), const(3)),
    (min_(x, min_(y, z)), min_(min_(x, y), z)),
    (x - 4 * y + 4 * y, x),
    (x * 0, const(0)),
])
def test_canonical_forms(a, b):
    assert a == b and hash(a) == hash(b) and str(a) == str(b)


def test_printing():
    assert str(-(x // 4) + y) == "y - x//4"
    assert str(3 * (x % 5) - 2 * min_(x, y)) == "3*(x % 5) - 2*min(x, y)"
    assert str((-x) // 4) == "(-x)//4"
    assert str(x - 1) == "x - 1" and str(const(-3)) == "-3"
    assert str(max_(x, 0)) == "max(0, x)"


def test_range_rules():
    r = {"j": (0, 3)}
    assert (j // 4).simplify(r) == 0
    assert (j % 4).simplify(r) == j
    assert ((i - 4) % 8).simplify({"i": range(4, 12)}) == i - 4
    assert min_(i, j).simplify({"i": (5, 9), "j": (0, 3)}) == j
    assert (x // 4).bounds({"x": (-5, 5)}) == (-2, 1)
    assert (x % 4).bounds() == (0, 3)
    assert x.bounds() == (None, None)
    assert (x + 1).bounds({"x": (0, 3)}) == (1, 4)


def test_errors():
    with pytest.raises(ValueError, match="non-affine"):
        x * y
    for bad in (0, -2):
        with pytest.raises(ValueError, match="positive"):
            x // bad
        with pytest.raises(ValueError, match="positive"):
            x % bad
    with pytest.raises(ValueError):
        x // y
    with pytest.raises(TypeError):
        x / 2
    with pytest.raises(TypeError):
        x + 1.5
    with pytest.raises(TypeError):
        int(x)
    with pytest.raises(TypeError):
        bool(x)
    for name in ("min", "1a", "a-b", ""):
        with pytest.raises(ValueError):
            var(name)
    for text in ("x +", "x // y", "2 * (x", "x ** 2", "x y", "min()"):
        with pytest.raises(ValueError):
            parse(text)
    with pytest.raises(ValueError, match="no value"):
        (x + y).eval({"x": 1})
    with pytest.raises(ValueError):
        x.bounds({"x": (3, 2)})
    with pytest.raises(OverflowError):
        const(2 ** 62) * 4
    with pytest.raises(TypeError):
        Expr()
    with pytest.raises(ValueError, match="lacks"):
        (x + y).compile(["x"])
    with pytest.raises(ValueError):
        (x + y).compile(["x", "y"])([1])


def test_const_behaves_like_int_in_dicts():
    assert const(3) == 3 and hash(const(3)) == hash(3) and {const(3): "a"}[3] == "a"
    assert as_expr(4) == 4 and as_expr(np.int64(4)) == 4 and x + np.int32(2) == x + 2


def test_compiled_forms():
    e = 3 * y + 2 * x + 1
    ce = e.compile(["x", "y", "unused"])
    assert isinstance(ce, CompiledExpr) and ce.is_affine
    assert list(ce.coeffs) == [2, 3, 0] and ce.constant == 1
    assert ce([5, 2, 99]) == 17
    nl = (x * 128 + (y % 512) // 128 + min_(x, y) - max_(z // 3, 2)).compile("xyz")
    assert not nl.is_affine
    rows = np.array([[1, 700, -4], [-3, -9, 100], [0, 0, 0]], dtype=np.int64)
    want = [(r[0] * 128 + (r[1] % 512) // 128 + min(r[0], r[1]) - max(r[2] // 3, 2)) for r in rows.tolist()]
    assert list(nl.eval_many(rows)) == want


def test_compiled_pickles():
    import pickle
    ce = (x * 3 + y // 4).compile(["x", "y"])
    back = pickle.loads(pickle.dumps(ce))
    assert back.expr == ce.expr and back.var_order == ("x", "y") and back([5, 9]) == 17


def test_compiled_deep_program_uses_heap_stack():
    e = x
    for n in range(100):
        e = (e + y) % (999 + n % 2) + z // 3
    ce = e.compile(VARS := ("x", "y", "z"))
    assert ce.depth > 64
    for vals in ([5, 7, 11], [-100, 3, -8]):
        assert ce(vals) == e.eval(dict(zip(VARS, vals)))


def test_introspection():
    e = 3 * x + (y // 4) - min_(x, z) + 7
    assert e.op == "add" and x.op == "var" and x.name == "x" and e.name is None
    atoms, c = e.terms()
    assert c == 7 and atoms == {x: 3, y // 4: 1, min_(x, z): -1}
    assert (y // 4).op == "floordiv" and (y // 4).children == (y,)
    assert min_(x, z).op == "min" and set(min_(x, z).children) == {x, z}
    assert const(5).terms() == ({}, 5) and x.terms() == ({x: 1}, 0)
    assert var("loop.i_0") + 1 == parse("loop.i_0 + 1")
    assert parse("  2*( i+1 ) -  -3 ") == 2 * i + 5
    assert parse("max(i, j, 3) % 5") == max_(i, j, 3) % 5
    assert Expr.from_json(7) == 7
    with pytest.raises(ValueError):
        Expr.from_json(1.5)


def test_numpy_integers_interoperate():
    assert np.int64(3) * x == 3 * x and x * np.int32(3) == 3 * x
    assert np.int64(3) + x == x + 3 and x // np.int64(2) == x // 2
    ce = (x * 2 + y).compile(["x", "y"])
    assert ce(np.array([3, 4], dtype=np.int32)) == 10 and ce((3, 4)) == 10
    assert ce.eval_many(np.zeros((0, 2), dtype=np.int64)).shape == (0,)


def test_no_reference_leaks():
    import gc
    import sys
    import tracemalloc

    def churn(n):
        for step in range(n):
            e = (x * 3 + y * 5 + step) // 4 + min_(x, y + 1) % 7 - max_(x, 2) + (x % 8) // 2 + 4 * (x // 8)
            e.subs({"x": 3, "y": x + 1}).simplify({"x": (0, 9)})
            e.compile(["x", "y"])([1, 2])
            try:
                e * (2 ** 62)
            except OverflowError:
                pass

    churn(200)
    gc.collect()
    before = (sys.getrefcount(x), sys.getrefcount(y))
    tracemalloc.start()
    churn(1000)
    gc.collect()
    m1 = tracemalloc.get_traced_memory()[0]
    churn(1000)
    gc.collect()
    m2 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before
    assert m2 - m1 < 64 * 1024      # nothing per iteration stays behind


def test_text_form_does_not_depend_on_hash_seed():
    # canonical order uses names and structure, never hashes: NEFF bytes stay reproducible
    import os
    import subprocess
    import sys

    import neuronxcc
    code = ("from neuronxcc.pelican import var, min_\n"
            "v = [var(n) for n in ('zeta', 'a', 'mid', 'b0', 'q.r')]\n"
            "e = sum(((k + 1) * x for k, x in enumerate(v)), 0) + (v[0] + 3 * v[2]) // 8 + min_(v[1], v[3], v[4] % 5)\n"
            "print(e)\n")
    root = os.path.dirname(os.path.dirname(neuronxcc.__file__))
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                capture_output=True, text=True).stdout)
    assert len(outs) == 1
