"""HLO-to-HLO passes and their registry (behind ``hlo-opt``).

The pass contract follows XLA's: a pass has a ``name`` and ``run(module) ->
changed``; ``run_pipeline`` runs passes in order and verifies the module after
each one, so a pass that breaks the module is named in the error. One
registry (``PASSES``) feeds ``--passes`` parsing and ``--list-passes``;
registering a name twice fails.

Passes rewrite a module in place. Replacing an instruction keeps the entry
root's exact shape (layout included), so the program's interface never
changes; parameters are never removed.
"""
import logging
import math

import numpy as np

from neuronxcc.errors import CompilerError, CompilerInvalidInputException, InternalCompilerError
from neuronxcc.hlo.compare import literal_key

log = logging.getLogger("neuronxcc.hlo.passes")

PASSES = {}   # name -> pass class

# ops whose execution has effects beyond their result: never removed, merged or folded
SIDE_EFFECT_OPS = frozenset((
    "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng", "rng-get-and-update-state",
    "rng-bit-generator", "after-all", "add-dependency", "all-reduce", "all-gather", "reduce-scatter",
    "all-to-all", "collective-permute", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-permute-start", "collective-permute-done", "partition-id", "replica-id",
    "optimization-barrier", "domain"))


def register(cls):
    if cls.name in PASSES:
        raise InternalCompilerError("HLO pass %s is registered twice" % cls.name)
    PASSES[cls.name] = cls
    return cls


def has_side_effect(instr):
    if instr.opcode in SIDE_EFFECT_OPS:
        return True
    return instr.opcode == "custom-call" and bool(instr.attrs.get("custom_call_has_side_effect"))


def unknown_pass_error(name):
    return CompilerInvalidInputException("unknown HLO pass %r; known passes: %s (see hlo-opt --list-passes)"
                                         % (name, ", ".join(sorted(PASSES))))


def make_pipeline(names):
    out = []
    for n in names:
        n = n.strip()
        if not n:
            continue
        if n not in PASSES:
            raise unknown_pass_error(n)
        out.append(PASSES[n]())
    return out


def run_pipeline(module, passes):
    """Run passes in order, verifying after each; returns the list of names that changed the module."""
    changed = []
    for p in passes:
        try:
            did = p.run(module)
        except CompilerError:
            raise
        except Exception as e:
            raise InternalCompilerError("Failed in HLO pass pipeline (step: %s): %s: %s"
                                        % (p.name, type(e).__name__, e)) from e
        if did not in (True, False):
            raise InternalCompilerError("HLO pass %s returned %r, not True/False" % (p.name, did))
        try:
            module.verify()
        except CompilerError as e:
            raise InternalCompilerError("HLO pass %s left an invalid module: %s" % (p.name, e.message)) from e
        log.info("hlo-opt: pass %s %s", p.name, "changed the module" if did else "made no change")
        if did:
            changed.append(p.name)
    return changed


# -- helpers ---------------------------------------------------------------------

def replace_uses(comp, old, new):
    """Make every user of ``old`` in ``comp`` (and the root) use ``new``."""
    for i in comp.instructions:
        if i is old:
            continue
        if any(o is old for o in i.operands):
            i.operands = [new if o is old else o for o in i.operands]
        if any(o is old for o in i.control_predecessors):
            i.control_predecessors = [new if o is old else o for o in i.control_predecessors]
    if comp.root is old:
        comp.root = new


def _attr_key(v):
    if hasattr(v, "instructions") and hasattr(v, "root"):
        return ("computation", id(v))
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return tuple(_attr_key(x) for x in v)
    return v


def scalar_constant_value(instr):
    """The value of a scalar constant, or of a broadcast of one; else None."""
    while instr.opcode in ("broadcast", "reshape", "copy") and len(instr.operands) == 1 and \
            instr.operands[0].shape.numel() == 1:
        instr = instr.operands[0]
    if instr.opcode == "constant" and instr.shape.is_array and instr.shape.numel() == 1:
        v = np.asarray(instr.literal).reshape(())
        return v.item() if v.dtype.kind in "biuf" else float(v.astype(np.float64))
    return None


def _is_zero(instr, negative):
    """A scalar (or broadcast scalar) zero; for floats its sign must be ``negative``."""
    v = scalar_constant_value(instr)
    if v is None or v != 0:
        return False
    if isinstance(v, float) or instr.shape.element_type[0] in "bf":
        return math.copysign(1.0, float(v)) < 0 if negative else math.copysign(1.0, float(v)) > 0
    return True


def _is_entry_root(module, comp, instr):
    return comp is module.entry and comp.root is instr


# -- passes -----------------------------------------------------------------------

class HloPass(object):
    name = None

    def run(self, module):
        raise NotImplementedError


@register
class DeadCodeElimination(HloPass):
    """Remove instructions nothing uses and computations nothing calls."""

    name = "dce"

    def run(self, module):
        changed = False
        for comp in module.computations.values():
            live = set()
            stack = [comp.root] + [i for i in comp.instructions if i.opcode == "parameter" or has_side_effect(i)]
            while stack:
                i = stack.pop()
                if i in live:
                    continue
                live.add(i)
                stack.extend(i.operands)
                stack.extend(i.control_predecessors)
            if len(live) != len(comp.instructions):
                comp.instructions = [i for i in comp.instructions if i in live]
                changed = True
        reachable, stack = set(), [module.entry]
        while stack:
            c = stack.pop()
            if c in reachable:
                continue
            reachable.add(c)
            for i in c.instructions:
                stack.extend(i.called_computations)
        for name in [n for n, c in module.computations.items() if c not in reachable]:
            del module.computations[name]
            changed = True
        return changed


@register
class CommonSubexpressionElimination(HloPass):
    """Merge instructions with the same opcode, shape, operands, attributes and literal."""

    name = "cse"

    def run(self, module):
        changed = False
        for comp in module.computations.values():
            seen = {}
            for i in list(comp.instructions):
                if i.opcode == "parameter" or has_side_effect(i):
                    continue
                key = (i.opcode, i.shape, tuple(id(o) for o in i.operands),
                       tuple(sorted((k, _attr_key(v)) for k, v in i.attrs.items() if k != "sharding")),
                       tuple(id(c) for c in i.called_computations), literal_key(i.literal),
                       tuple(sorted(i.frontend_attributes.items())))
                prev = seen.get(key)
                if prev is None:
                    seen[key] = i
                    continue
                if _is_entry_root(module, comp, i):
                    continue
                replace_uses(comp, i, prev)
                comp.instructions.remove(i)
                changed = True
        return changed


@register
class AlgebraicSimplification(HloPass):
    """Local identities: x+0, x-0, x*1, x/1, identity reshape/transpose/broadcast/convert/slice/copy/pad,
    double negation, reshape of reshape, one-operand concatenate."""

    name = "algsimp"

    def run(self, module):
        changed = False
        for comp in module.computations.values():
            for i in list(comp.instructions):
                new = self._simplify(i)
                if new is i:  # rewritten in place
                    changed = True
                    continue
                if new is None:
                    continue
                if _is_entry_root(module, comp, i) and new.shape != i.shape:
                    continue
                if not new.shape.same_dims(i.shape):
                    continue
                replace_uses(comp, i, new)
                changed = True
        if changed:
            DeadCodeElimination().run(module)
        return changed

    @staticmethod
    def _simplify(i):
        op, ops, a = i.opcode, i.operands, i.attrs
        # bit-exact identities only: for floats x + (+0) is +0 when x is -0, so only a -0 (or an
        # integer 0) may be dropped from an add, and only a +0 from a subtract
        if op == "subtract" and _is_zero(ops[1], negative=False):
            return ops[0]
        if op == "add" and _is_zero(ops[1], negative=True):
            return ops[0]
        if op == "add" and _is_zero(ops[0], negative=True):
            return ops[1]
        if op in ("multiply", "divide") and scalar_constant_value(ops[1]) == 1:
            return ops[0]
        if op == "multiply" and scalar_constant_value(ops[0]) == 1:
            return ops[1]
        if op in ("reshape", "copy", "convert", "bitcast") and ops and ops[0].shape.same_dims(i.shape):
            return ops[0]
        if op == "transpose" and tuple(a.get("dimensions", ())) == tuple(range(i.shape.rank)):
            return ops[0]
        if op == "broadcast" and ops[0].shape.same_dims(i.shape) and \
                tuple(a.get("dimensions", ())) == tuple(range(i.shape.rank)):
            return ops[0]
        if op == "slice" and ops[0].shape.same_dims(i.shape) and all(s == 0 and st == 1 for s, _, st in a["slice"]):
            return ops[0]
        if op == "pad" and all(p == (0, 0, 0) for p in a["padding"]):
            return ops[0]
        if op == "reverse" and not a.get("dimensions"):
            return ops[0]
        if op == "negate" and ops[0].opcode == "negate":
            return ops[0].operands[0]
        if op == "concatenate" and len(ops) == 1:
            return ops[0]
        if op == "reshape" and ops[0].opcode == "reshape":
            i.operands = [ops[0].operands[0]]
            return i  # rewritten in place; the inner reshape may die
        return None


# ops constant folding never evaluates: effects, control flow, or results that only grow constants
_NO_FOLD = frozenset(("parameter", "constant", "broadcast", "iota", "custom-call", "while", "conditional",
                      "call", "tuple", "get-tuple-element", "rng", "rng-bit-generator", "fusion"))
FOLD_LIMIT_BYTES = 1 << 20


@register
class ConstantFolding(HloPass):
    """Evaluate instructions whose operands are all constants, with the reference interpreter."""

    name = "constant-folding"

    def run(self, module):
        from neuronxcc.hlo.model import HloComputation, HloInstruction, HloModule
        from neuronxcc.hlo.interpreter import evaluate
        changed = False
        for comp in module.computations.values():
            for i in list(comp.instructions):
                if i.opcode in _NO_FOLD or has_side_effect(i) or not i.shape.is_array or not i.operands:
                    continue
                if not all(o.opcode == "constant" for o in i.operands) or i.shape.nbytes() > FOLD_LIMIT_BYTES:
                    continue
                params = [HloInstruction(o.name, "constant", o.shape, literal=o.literal) for o in i.operands]
                clone = HloInstruction(i.name, i.opcode, i.shape, params, i.attrs, i.called_computations)
                tiny_entry = HloComputation("fold", params + [clone], root=clone)
                callees = _callees(i)
                try:
                    tiny = HloModule("fold", callees + [tiny_entry], tiny_entry)
                    value = evaluate(tiny, [])[0]
                except CompilerError as e:
                    log.debug("constant-folding: %s not folded: %s", i.name, e)
                    continue
                folded = HloInstruction(i.name, "constant", i.shape, literal=np.asarray(value).reshape(i.shape.dims),
                                        metadata=i.metadata, frontend_attributes=i.frontend_attributes)
                folded.parent = comp
                comp.instructions[comp.instructions.index(i)] = folded
                replace_uses(comp, i, folded)
                changed = True
        if changed:
            DeadCodeElimination().run(module)
        return changed


def _callees(instr):
    seen, order = set(), []

    def visit(c):
        if c in seen:
            return
        seen.add(c)
        for i in c.instructions:
            for cc in i.called_computations:
                visit(cc)
        order.append(c)
    for c in instr.called_computations:
        visit(c)
    return order


@register
class ConvertInputsToOptimalShape(HloPass):
    """NxD runs this before weight-layout optimisation. Every input shape and layout is already
    optimal for this target (the Penguin layer chooses on-chip layouts itself), so the pass checks
    the entry parameters, logs that decision for each, and leaves the module unchanged."""

    name = "convert-inputs-to-optimal-shape"

    def run(self, module):
        for p in module.entry.parameters:
            log.info("convert-inputs-to-optimal-shape: parameter %d (%s) %s is kept as is: this target "
                     "takes inputs in any shape and layout", p.parameter_number, p.name, p.shape.to_text())
        return False


def pass_descriptions():
    return [(name, (cls.__doc__ or "").strip().split("\n")[0]) for name, cls in sorted(PASSES.items())]
