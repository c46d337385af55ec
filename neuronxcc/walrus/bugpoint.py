"""walrus_bugpoint_driver: shrink a BIR module while a predicate still holds.

    walrus_bugpoint_driver IN.json --predicate verifier [--output reduced.json]
    walrus_bugpoint_driver IN.json --predicate birsim-mismatch [--walrus-passes p1,p2,...]
    walrus_bugpoint_driver IN.json --predicate command 'my_check {}'
    ... [--check]       only evaluate the predicate on IN.json (exit 1 when it holds)

Predicates:
  verifier         ``birpy.verify`` (plus walrus's allocation checks) fails with the
                   same error class and the same message once digits are ignored;
  birsim-mismatch  birsim's outputs of the module as given differ from those of the
                   module after ``--walrus-passes`` (default: the allocation and
                   synchronisation passes), on the same seeded random inputs: a
                   miscompile by those passes;
  command          the command (``{}`` is replaced by the candidate file) exits with
                   the same nonzero status as on the input.

Reductions, repeated until nothing more helps (delta debugging): delete
chunks of instructions (halving chunk sizes), delete a loop, replace a loop
by its first iteration, halve a loop's trip count; finally drop memlocs and
scratch/const tensors nothing uses. Prints "You can reproduce the problem
with: ..." naming the reduced file.
"""
import copy
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

from neuronxcc import errors
from neuronxcc.common.toolshell import ToolParser, run_main
from neuronxcc.walrus.cli import get_target

PROG = "walrus_bugpoint_driver"

DEFAULT_MISMATCH_PASSES = "lsa,coloring,coloring_allocator,anti_dependency_analyzer,dep_reduction"


# -- JSON-level edits (candidates are module JSON dicts) ---------------------------

def _bodies(node):
    if node["kind"] == "if":
        return [node.setdefault("then", []), node.setdefault("else", [])]
    if node["kind"] in ("loop", "while"):
        return [node["body"]]
    return []


def _walk(body, out):
    for n in body:
        out.append((body, n))
        for b in _bodies(n):
            _walk(b, out)
    return out


def _nodes(obj, kind=None):
    return [(b, n) for b, n in _walk(obj["body"], []) if kind is None or n["kind"] == kind]


def _without(obj, ids):
    new = copy.deepcopy(obj)

    def prune(body):
        body[:] = [n for n in body if n.get("id") not in ids]
        for n in body:
            for b in _bodies(n):
                prune(b)
    prune(new["body"])
    return new


def _replace_node(obj, node_id, fn):
    new = copy.deepcopy(obj)
    for body, n in _walk(new["body"], []):
        if n.get("id") == node_id:
            i = next(k for k, x in enumerate(body) if x is n)
            body[i:i + 1] = fn(n)
            return new
    return None


def _subst_json(nodes, var, value):
    from neuronxcc.starfish.birpy.serde import node_from_json, node_to_json
    from neuronxcc.walrus.passes.transform import subst
    objs = [node_from_json(n) for n in nodes]
    subst(objs, var, value)
    return [node_to_json(o) for o in objs]


def _count_instructions(obj):
    return len(_nodes(obj, "inst"))


def _cleanup(obj):
    """Drop memlocs and non-I/O tensors that no operand names."""
    used = set()
    for _, n in _nodes(obj, "inst"):
        for ap in n.get("dsts", []) + n.get("srcs", []):
            used.add(ap["target"])
    new = copy.deepcopy(obj)
    new["memlocs"] = [m for m in new.get("memlocs", []) if m["name"] in used]
    io = set(new.get("inputs", [])) | set(new.get("outputs", []))
    new["tensors"] = [t for t in new.get("tensors", []) if t["name"] in used or t["name"] in io]
    return new


# -- predicates -------------------------------------------------------------------

def _load(obj):
    from neuronxcc.starfish import birpy
    m = birpy.from_json(obj)
    m.ensure_ids()
    return m


def _signature(e):
    return type(e).__name__, re.sub(r"\d+", "N", str(e))


class VerifierPredicate:
    def __init__(self, target):
        self.target = target
        self.sig = None

    def _error(self, obj):
        from neuronxcc.walrus.passes.verify import verify_module
        from neuronxcc.walrus.registry import PassContext
        try:
            verify_module(_load(obj), PassContext(self.target))
        except errors.CompilerError as e:
            return _signature(e)
        return None

    def init(self, obj):
        self.sig = self._error(obj)
        return self.sig is not None

    def __call__(self, obj):
        return self._error(obj) == self.sig

    def reproduce(self, path):
        return "walrus_driver --input %s --output %s --walrus-passes birverifier --target %s" % (
            shlex.quote(path), shlex.quote(path + ".out.json"), self.target.name)


class MismatchPredicate:
    def __init__(self, target, passes, seed=0):
        self.target = target
        self.passes = passes
        self.seed = seed

    def _outputs(self, module):
        from neuronxcc.walrus.passes.simcheck import random_inputs, run_birsim
        return run_birsim(module, random_inputs(module, self.seed), self.target)

    def __call__(self, obj):
        import numpy as np
        from neuronxcc.walrus.registry import PassContext, parse_pass_list, run_passes
        try:
            ref = self._outputs(_load(obj))
        except Exception:
            return False            # the reference itself must run
        try:
            m = _load(obj)
            run_passes(m, parse_pass_list(self.passes), PassContext(self.target))
            got = self._outputs(m)
        except errors.OutOfMemoryError:
            return False
        except Exception:
            return True             # the passes or the run broke: still a miscompile
        for a, b in zip(ref, got):
            if a.shape != b.shape or not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True):
                return True
        return False

    def init(self, obj):
        return self(obj)

    def reproduce(self, path):
        return "walrus_bugpoint_driver %s --predicate birsim-mismatch --walrus-passes %s --target %s --check" % (
            shlex.quote(path), self.passes, self.target.name)


class CommandPredicate:
    def __init__(self, cmd, timeout=300):
        self.cmd = cmd
        self.timeout = timeout
        self.status = None
        self.tmpdir = tempfile.mkdtemp(prefix="bugpoint-")

    def _status(self, obj):
        path = os.path.join(self.tmpdir, "candidate.bir.json")
        with open(path, "w") as f:
            json.dump(obj, f)
        cmd = self.cmd.replace("{}", shlex.quote(path)) if "{}" in self.cmd else self.cmd + " " + shlex.quote(path)
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, timeout=self.timeout).returncode
        except subprocess.TimeoutExpired:
            return None

    def init(self, obj):
        self.status = self._status(obj)
        return self.status not in (0, None)

    def __call__(self, obj):
        return self._status(obj) == self.status

    def reproduce(self, path):
        return self.cmd.replace("{}", shlex.quote(path)) if "{}" in self.cmd else self.cmd + " " + shlex.quote(path)


# -- the reducer ------------------------------------------------------------------

class Reducer:
    def __init__(self, pred, max_tests=2000, log=None):
        self.pred = pred
        self.tests = 0
        self.max_tests = max_tests
        self.log = log or (lambda msg: None)

    def holds(self, obj):
        if self.tests >= self.max_tests:
            return False
        self.tests += 1
        try:
            return bool(self.pred(obj))
        except Exception:
            return False

    def delete_instructions(self, obj):
        ids = [n["id"] for _, n in _nodes(obj, "inst")]
        chunk = max(1, len(ids) // 2)
        while chunk >= 1 and ids:
            i = 0
            progress = False
            while i < len(ids):
                cut = set(ids[i:i + chunk])
                cand = _without(obj, cut)
                if self.holds(cand):
                    obj = cand
                    ids = [x for x in ids if x not in cut]
                    progress = True
                else:
                    i += chunk
            if not progress:
                chunk //= 2
        return obj

    def reduce_loops(self, obj):
        changed = True
        while changed and self.tests < self.max_tests:
            changed = False
            for _, lp in _nodes(obj, "loop") + _nodes(obj, "while") + _nodes(obj, "if"):
                nid = lp["id"]
                cands = [_replace_node(obj, nid, lambda n: [])]
                if lp["kind"] == "loop":
                    cands.append(_replace_node(obj, nid, lambda n: _subst_json(n["body"], n["var"], n["start"])))
                    trips = len(range(lp["start"], lp["stop"], lp["step"]))
                    if trips > 1:
                        def halve(n, t=trips):
                            n = dict(n)
                            n["stop"] = n["start"] + n["step"] * max(1, t // 2)
                            return [n]
                        cands.append(_replace_node(obj, nid, halve))
                else:
                    cands.append(_replace_node(obj, nid, lambda n: _bodies(n)[0]))
                for c in cands:
                    if c is not None and self.holds(c):
                        obj = c
                        changed = True
                        break
                if changed:
                    break
        return obj

    def run(self, obj):
        before = None
        while before != _count_instructions(obj) + len(_nodes(obj)) and self.tests < self.max_tests:
            before = _count_instructions(obj) + len(_nodes(obj))
            obj = self.reduce_loops(obj)
            obj = self.delete_instructions(obj)
            self.log("bugpoint: %d instructions, %d nodes after %d tests"
                     % (_count_instructions(obj), len(_nodes(obj)), self.tests))
        c = _cleanup(obj)
        if self.holds(c):
            obj = c
        return obj


def reduce_module(obj, pred, max_tests=2000, log=None):
    """Shrink module JSON ``obj`` while ``pred`` holds (pred.init returned True). -> (obj, tests)"""
    r = Reducer(pred, max_tests, log)
    return r.run(obj), r.tests


def _main(argv):
    from neuronxcc.walrus.bir import read_module_json, save_module_json
    p = ToolParser(prog=PROG, description="Shrink a BIR module while a predicate holds.")
    p.add_argument("input")
    p.add_argument("--predicate", nargs="+", required=True, metavar="KIND [CMD]",
                   help="verifier | birsim-mismatch | command '<cmd with {} for the file>'")
    p.add_argument("--output", default=None, help="reduced module (default: <input>.reduced.json)")
    p.add_argument("--target", default="trn1")
    p.add_argument("--walrus-passes", default=DEFAULT_MISMATCH_PASSES)
    p.add_argument("--max-tests", type=int, default=2000)
    p.add_argument("--check", action="store_true", help="only evaluate the predicate; exit 1 when it holds")
    p.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(argv)
    target = get_target(a.target, PROG)
    kind = a.predicate[0]
    if kind == "verifier":
        pred = VerifierPredicate(target)
    elif kind == "birsim-mismatch":
        pred = MismatchPredicate(target, a.walrus_passes)
    elif kind == "command":
        if len(a.predicate) < 2:
            raise errors.InvalidArgumentError("--predicate command needs the command")
        pred = CommandPredicate(" ".join(a.predicate[1:]))
    else:
        raise errors.InvalidArgumentError("unknown predicate '%s' "
                                          "(verifier, birsim-mismatch, command)" % kind)
    obj, _ = read_module_json(a.input)
    holds = pred.init(obj)
    if a.check:
        print("predicate %s %s on %s" % (kind, "holds" if holds else "does not hold", a.input))
        return 1 if holds else 0
    if not holds:
        raise errors.InvalidArgumentError("the predicate '%s' does not hold on %s; "
                                          "nothing to reduce" % (kind, a.input))
    n0 = _count_instructions(obj)
    say = (lambda m: None) if a.quiet else (lambda m: sys.stderr.write(m + "\n"))
    red, tests = reduce_module(obj, pred, a.max_tests, say)
    out = a.output or (os.path.splitext(a.input)[0] + ".reduced.json")
    save_module_json(red, out)
    print("Reduced %s from %d to %d instructions (%d predicate tests): %s"
          % (a.input, n0, _count_instructions(red), tests, out))
    print("You can reproduce the problem with: %s" % pred.reproduce(out))
    return 0


def main(argv=None):
    return run_main(PROG, _main, argv)
