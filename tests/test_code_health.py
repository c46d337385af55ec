"""Source checks that keep issue 10's clean-ups from coming back (read from the sources, nothing built):
no "not built yet" fallback around an import, birsim's strided walk written once, the misleading
module names gone, and no module over the size budget."""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "neuronxcc")


def _sources(exts=(".py",)):
    for dp, _, fns in os.walk(PKG):
        for fn in sorted(fns):
            if fn.endswith(exts):
                yield os.path.join(dp, fn)


def _rel(path):
    return os.path.relpath(path, ROOT)


def test_no_import_error_becomes_not_built_yet():
    """An ImportError is a bug to report as itself, never turned into NotBuiltYetError /
    NkiNotImplementedError (that hid real import bugs as 'not built yet')."""
    bad = []
    for path in _sources():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for h in ast.walk(tree):
            if isinstance(h, ast.ExceptHandler) and h.type is not None and \
                    any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
                        for n in ast.walk(h.type)):
                for r in ast.walk(h):
                    if isinstance(r, ast.Raise) and r.exc is not None and \
                            re.search(r"NotBuiltYet|NotImplemented", ast.dump(r.exc)):
                        bad.append("%s:%d" % (_rel(path), r.lineno))
    assert bad == [], "\n".join(bad)


def test_the_strided_walk_is_written_once():
    """birsim's kernels walk an access pattern's outer dimensions with Rows (rows_init / rows_next in
    _kernels.pxd); a nest of loops over nums[0], nums[1], ... is the copy the duplicate finder found ten
    times."""
    nest = re.compile(r"for \w+ in range\((\w+)\[0\]\):\s*\n\s*for \w+ in range\(\1\[1\]\)")
    bad = ["%s:%d" % (_rel(p), t[:m.start()].count("\n") + 1) for p in _sources((".pyx", ".pxd"))
           for t in [open(p, encoding="utf-8").read()] for m in nest.finditer(t)]
    assert bad == [], "\n".join(bad)
    pxd = open(os.path.join(PKG, "starfish", "birsim", "_kernels.pxd"), encoding="utf-8").read()
    assert "rows_next" in pxd and "rows_init" in pxd


def test_misleading_module_names_are_gone():
    """lsa lives in lsa.py (was sync.py), the verifier in verify.py and the metrics in metrics.py (was
    report.py), tuple/gte/copy in interp_structure.py (was interp_elementwise.py), walrus's standalone
    tools in standalone.py (was tools.py, next to starfish/tools.py)."""
    gone = ["walrus/passes/sync.py", "walrus/passes/report.py", "walrus/tools.py"]
    assert [g for g in gone if os.path.exists(os.path.join(PKG, g))] == []
    for f in ("walrus/passes/lsa.py", "walrus/passes/verify.py", "walrus/passes/metrics.py",
              "hlo/interp_structure.py", "walrus/standalone.py"):
        assert os.path.exists(os.path.join(PKG, f)), f
    elementwise = open(os.path.join(PKG, "hlo", "interp_elementwise.py"), encoding="utf-8").read()
    assert not re.search(r'^\s*"(tuple|get-tuple-element|copy)"\s*:', elementwise, re.M)


# Public API only users call (nothing in the checkout names it), name -> one-word reason.
USER_API = {
    "neuronxcc/nki/language/__init__.py:bfp16": "nki.language",
    "neuronxcc/nki/language/__init__.py:shared_identity_matrix": "nki.language",
}
# decorators that wrap a definition without registering it anywhere (a registering decorator such as
# @handler("dot") or @register is the reference that makes the definition reachable)
_WRAPPERS = {"dataclass", "lru_cache", "cache", "contextmanager", "total_ordering", "final", "wraps",
             "cached_property"}
_CONST = re.compile(r"_?[A-Z][A-Z0-9_]*\Z")
# Cython top-level definitions: def / cpdef / cdef functions, (cdef) classes, UPPER_CASE constants
_PYX_DEFS = (
    re.compile(r"^(?:cpdef|cdef|def)\b(?!\s+(?:extern|class|struct|enum|union|packed|cppclass|public)\b)"
               r"[^(=\n]*?(\w+)\s*\(", re.M),
    re.compile(r"^(?:cdef\s+)?class\s+(\w+)", re.M),
    re.compile(r"^(?:cdef\s+[\w.]+\s+)?(_?[A-Z][A-Z0-9_]*)\s*=", re.M),
)


def _module_level_names(path):
    """(name, line) of each module-level function, class and UPPER_CASE constant ``path`` defines."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".pyx"):
        return [(m.group(1), text[:m.start()].count("\n") + 1) for r in _PYX_DEFS for m in r.finditer(text)]
    out = []
    for node in ast.parse(text, path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            if all((d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")) in _WRAPPERS
                   for d in names):
                out.append((node.name, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name) and _CONST.match(t.id):
                    out.append((t.id, node.lineno))
    return out


def _referenced_words():
    """How often each word occurs in the package, tests/, scripts/, docs/, examples/, ci/ and the build
    files (a string naming a function, as a registry or getattr would, counts)."""
    from collections import Counter
    words = Counter()
    roots = [PKG] + [os.path.join(ROOT, d) for d in ("tests", "scripts", "docs", "examples", "ci")]
    files = [os.path.join(ROOT, f) for f in ("pyproject.toml", "setup.py", "README.md")]
    for root in roots:
        for dp, dns, fns in os.walk(root):
            dns[:] = [d for d in dns if d != "__pycache__"]
            files += [os.path.join(dp, f) for f in fns
                      if f.endswith((".py", ".pyx", ".pxd", ".pyi", ".md", ".txt", ".json", ".sh", ".toml"))]
    for f in files:
        words.update(re.findall(r"\w+", open(f, encoding="utf-8", errors="replace").read()))
    return words


def test_no_dead_code():
    """Every module-level function, class and UPPER_CASE constant of the package is named somewhere besides
    its own definition (package, tests, scripts, docs), or is user API listed in USER_API."""
    defs = [(name, _rel(path), line) for path in _sources((".py", ".pyx"))
            for name, line in _module_level_names(path) if not name.startswith("__")]
    times_defined = {}
    for name, _, _ in defs:
        times_defined[name] = times_defined.get(name, 0) + 1
    words = _referenced_words()
    dead = ["%s:%d %s" % (rel, line, name) for name, rel, line in defs
            if words[name] <= times_defined[name] and "%s:%s" % (rel, name) not in USER_API]
    assert dead == [], "referenced nowhere:\n" + "\n".join(dead)
    stale = [k for k in USER_API if not any(k == "%s:%s" % (rel, name) for name, rel, _ in defs)]
    assert stale == [], "USER_API names no definition: %s" % stale


# Over the budget with a reason, at most this many lines (a ratchet: it may shrink, never grow).
# (empty: pelican's expression core is split into _expr.pyx, the type, and _canon.pyx, the rules)
OVER_BUDGET = {}


def test_modules_stay_under_the_size_budget():
    """One concern per module, under ~800 lines (generated C excluded)."""
    big = []
    for path in _sources((".py", ".pyx", ".pxd")):
        n = sum(1 for _ in open(path, encoding="utf-8"))
        if n > OVER_BUDGET.get(_rel(path), 800):
            big.append("%s: %d lines" % (_rel(path), n))
    assert big == [], "\n".join(big)


def test_the_contributing_page_says_where_each_kind_of_change_goes():
    """docs/CONTRIBUTING.md has a recipe for each kind of change issue 10 names, pointing at files
    that exist, and says how to run one layer's tests."""
    text = open(os.path.join(ROOT, "docs", "CONTRIBUTING.md"), encoding="utf-8").read()
    for recipe in ("**A new element type.**", "**An HLO op.**", "**A BIR opcode.**", "**A walrus pass.**",
                   "**An NKI function.**"):
        assert recipe in text, recipe
    assert "## Tests" in text and "pytest tests/<layer>" in text
    for path in re.findall(r"`((?:neuronxcc|tests|scripts)/[\w/.]+\.py)`", text):
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_one_tool_shell():
    """Argument parsers and temp-and-rename writers come from neuronxcc.common.toolshell (ToolParser's
    usage errors are compiler errors with exit 70; atomic_write / atomic_output leave no partial file):
    no package module builds an argparse.ArgumentParser, and no module of the package or of scripts/
    renames a file into place itself."""
    shell = os.path.join(PKG, "common", "toolshell.py")
    scripts = os.path.join(ROOT, "scripts")
    paths = list(_sources()) + [os.path.join(scripts, f) for f in sorted(os.listdir(scripts)) if f.endswith(".py")]
    bad = []
    for path in paths:
        if path == shell:
            continue
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if not isinstance(node, (ast.ClassDef, ast.Call)):
                continue
            if isinstance(node, ast.ClassDef):
                if path.startswith(PKG) and any("ArgumentParser" in ast.dump(b) for b in node.bases):
                    bad.append("%s:%d subclasses ArgumentParser" % (_rel(path), node.lineno))
                continue
            f = node.func
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if owner == "argparse" and f.attr == "ArgumentParser" and path.startswith(PKG):
                bad.append("%s:%d argparse.ArgumentParser" % (_rel(path), node.lineno))
            if owner == "os" and f.attr in ("replace", "rename"):
                bad.append("%s:%d os.%s" % (_rel(path), node.lineno, f.attr))
    assert bad == [], "\n".join(bad)
