"""The package's import structure: no import circles, no lower layer reaching up to the
driver, the NKI tracer not reaching up to nki.language / nki.isa, no private name used across
modules (imported, or read as ``module._name``).

Read from the sources (every ``import`` statement, function-level ones included: a lazy
import is still a dependence), so the test needs nothing built.
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "neuronxcc")

# Layers below the driver: none of them may import neuronxcc.driver.
LOWER_LAYERS = ("neuronxcc.common", "neuronxcc.hlo", "neuronxcc.starfish", "neuronxcc.walrus", "neuronxcc.neff",
                "neuronxcc.hwm", "neuronxcc.pelican", "neuronxcc.errors")


def _modules():
    mods = {}
    for dp, _, fns in os.walk(PKG):
        for fn in fns:
            if fn.endswith((".py", ".pyx", ".pxd")):
                path = os.path.join(dp, fn)
                name = os.path.relpath(path, ROOT).rsplit(".", 1)[0].replace(os.sep, ".")
                if name.endswith(".__init__"):
                    name = name[: -len(".__init__")]
                mods.setdefault(name, path)
    return mods


MODULES = _modules()


_IMPORTS = {}


def _imports(path):
    """(imported module, names imported from it, line) of every absolute neuronxcc import in ``path``."""
    if path in _IMPORTS:
        return _IMPORTS[path]
    if not path.endswith(".py"):
        return []
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.startswith("neuronxcc"):
            out.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names if a.name.startswith("neuronxcc"))
    _IMPORTS[path] = out
    return out


def _targets(base, names):
    """The modules ``from BASE import NAMES`` (or ``import BASE``) depends on: each name that is a
    submodule, and BASE itself when some name is not (an attribute of BASE, or no names at all)."""
    subs = [base + "." + n for n in names if base + "." + n in MODULES]
    if len(subs) < len(names) or not names:
        subs.append(base)
    return [m for m in subs if m in MODULES]


def _edges():
    edges = {}
    for mod, path in MODULES.items():
        deps = set()
        for base, names, _ in _imports(path):
            deps.update(_targets(base, names))
        deps.discard(mod)
        edges[mod] = deps
    return edges


def _cycles(edges):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_scanner_sees_lazy_imports_and_every_name(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\n\ndef f():\n    from neuronxcc.nki import language as nl\n    return nl\n\n\n"
                   "class C:\n    def g(self):\n        import neuronxcc.nki.isa\n")
    assert [(b, n) for b, n, _ in _imports(str(src))] == [("neuronxcc.nki", ["language"]), ("neuronxcc.nki.isa", [])]
    assert sorted(_targets("neuronxcc.nki._trace", ["ops", "tensor"])) == ["neuronxcc.nki._trace.ops",
                                                                           "neuronxcc.nki._trace.tensor"]
    assert sorted(_targets("neuronxcc.nki._trace", ["ops", "trace_kernel"])) == ["neuronxcc.nki._trace",
                                                                                 "neuronxcc.nki._trace.ops"]


def test_no_import_cycles():
    found = _cycles(_edges())
    assert found == [], "import circles: %s" % found


def test_lower_layers_do_not_import_the_driver():
    bad = ["%s:%d imports %s" % (mod, line, base) for mod in sorted(MODULES) if mod.startswith(LOWER_LAYERS)
           for base, _, line in _imports(MODULES[mod]) if base.startswith("neuronxcc.driver")]
    assert bad == [], "\n".join(bad)


def test_the_tracer_does_not_import_the_nki_api():
    """nki.language / nki.isa are built on the tracer (they re-export its functions); the tracer never
    reaches back up to them, not even lazily inside a function."""
    api = ("neuronxcc.nki.language", "neuronxcc.nki.isa")
    bad = ["%s:%d imports %s" % (mod, line, t) for mod in sorted(MODULES) if mod.startswith("neuronxcc.nki._trace")
           for base, names, line in _imports(MODULES[mod]) for t in _targets(base, names) if t.startswith(api)]
    assert bad == [], "\n".join(bad)


def _private_attribute_uses(path):
    """(line, alias, name, module) of every ``alias._name`` where ``alias`` is a neuronxcc module this
    file imported (``import neuronxcc.x as alias`` / ``from neuronxcc import x``)."""
    if not path.endswith(".py"):
        return []
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    alias = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("neuronxcc"):
            alias.update((a.asname or a.name, node.module + "." + a.name) for a in node.names
                         if node.module + "." + a.name in MODULES)
        elif isinstance(node, ast.Import):
            alias.update((a.asname, a.name) for a in node.names if a.asname and a.name in MODULES)
    return [(node.lineno, node.value.id, node.attr, alias[node.value.id]) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in alias
            and node.attr.startswith("_") and not node.attr.startswith("__")
            and alias[node.value.id] + "." + node.attr not in MODULES]


def test_private_attribute_scanner(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from neuronxcc.nki._trace import ops\nimport neuronxcc.errors as E\n\n\n"
                   "def f():\n    return ops._hidden(E._x, ops.public)\n")
    assert [(a, n) for _, a, n, _ in _private_attribute_uses(str(src))] == [("ops", "_hidden"), ("E", "_x")]


def test_no_private_names_across_modules():
    bad = []
    for mod, path in MODULES.items():
        for base, names, line in _imports(path):
            for n in names:
                if n.startswith("_") and not n.startswith("__") and base + "." + n not in MODULES:
                    bad.append("%s:%d imports %s from %s" % (os.path.relpath(path, ROOT), line, n, base))
        bad.extend("%s:%d uses %s.%s of %s" % (os.path.relpath(path, ROOT), line, a, n, m)
                   for line, a, n, m in _private_attribute_uses(path))
    assert bad == [], "\n".join(bad)
