"""The HLO reference interpreter: the executable definition of what an HLO
module computes, and the source of the goldens every later stage is checked
against.

Built like XLA's HloEvaluator: one handler per opcode (the ``interp_*``
modules register them; ``neuronxcc.hlo.ops.OPS`` names which handler serves
which opcode), and ``is_implemented(opcode)``. Handlers are vectorised with
numpy and ml_dtypes; arithmetic on floats narrower than f32 is carried out in
f32 and rounded to nearest even, as XLA:CPU does.

Each computation is compiled once into a plan (a flat list of steps with
operand slots and the slots that die after each step), so the per-instruction
cost is one Python call. Scalar computations applied elementwise (reduce and
scatter combiners, sort comparators, map) are evaluated once on whole arrays
("lifted"); a computation that cannot be lifted falls back to element-by-element
evaluation.

Known limits: reducers are applied as a balanced tree (exact for the
associative reducers XLA requires; a non-associative one can differ from
XLA:CPU's sequential order); sorts are always stable (an is_stable=false sort
with ties may order equal keys differently from XLA:CPU); a computation
that cannot be lifted runs element by element (slow). Narrow floats are
rounded after every op, as the HLO says; XLA:CPU (xla_allow_excess_precision,
on by default) drops a bf16/f16 rounding that a convert back to f32 follows,
so e.g. ``convert(f32, dot(bf16, bf16) -> bf16)`` from XLA carries f32
precision and differs from ours by up to half a bf16 ulp, outside the f32
tolerance of the converted result.

API (docs/INTERFACES.md section 3)::

    outs = evaluate(module, inputs)   # inputs: arrays in parameter order
                                      # outs: leaves of the result, flattened
"""
import functools

import numpy as np

from neuronxcc.errors import CompilerError, HloVerifyError, InternalCompilerError, TensorTooLargeError
from neuronxcc.hlo import ops as _ops
from neuronxcc.hlo.interp_blas import single_threaded_blas
from neuronxcc.hlo.interp_base import (HANDLERS, PREPARERS, TOKEN, NotLiftable, cast, dims_of, dtype_of,
                                       flatten_value, is_tuple_shape, shape_bytes)
# Handler modules register themselves in HANDLERS on import.
from neuronxcc.hlo import interp_elementwise  # noqa: F401
from neuronxcc.hlo import interp_structure  # noqa: F401
from neuronxcc.hlo import interp_shape  # noqa: F401
from neuronxcc.hlo import interp_indexing  # noqa: F401
from neuronxcc.hlo import interp_reduce  # noqa: F401
from neuronxcc.hlo import interp_linalg  # noqa: F401
from neuronxcc.hlo import interp_sort  # noqa: F401
from neuronxcc.hlo import interp_control  # noqa: F401
from neuronxcc.hlo import interp_rng  # noqa: F401
from neuronxcc.hlo import interp_nki  # noqa: F401
from neuronxcc.hlo import interp_collective  # noqa: F401
from neuronxcc.hlo import interp_batchnorm  # noqa: F401

__all__ = ["evaluate", "evaluate_ranks", "is_implemented", "Evaluator", "TOKEN", "DEFAULT_MAX_TENSOR_BYTES", "PLAN_BOUND"]

# One tensor larger than this cannot be materialised (TensorTooLargeError).
DEFAULT_MAX_TENSOR_BYTES = 8 << 30

# Ops that are the identity on rank-0 values; allowed inside lifted computations.
_SCALAR_IDENTITY = {"broadcast", "reshape", "bitcast", "transpose", "copy", "slice", "reverse",
                    "optimization-barrier", "opt-barrier"}
_LIFTABLE_CATEGORIES = {_ops.UNARY, _ops.BINARY, _ops.TERNARY}
_LIFTABLE_OPS = {"parameter", "constant", "tuple", "get-tuple-element", "call", "fusion", "map", "copy",
                 "after-all", "add-dependency", "partition-id", "replica-id"}


# Opcodes whose values the plan binds directly (arguments, literals) instead of a handler.
PLAN_BOUND = ("parameter", "constant")


def is_implemented(opcode, custom_call_target=None):
    """True when the interpreter has a handler for ``opcode`` (same table as list-operators)."""
    if not _ops.is_implemented(opcode, custom_call_target):
        return False
    if opcode == "custom-call" and custom_call_target is not None:
        return _ops.CUSTOM_CALL_TARGETS[custom_call_target] in HANDLERS
    return opcode in PLAN_BOUND or _ops.OPS[opcode].handler in HANDLERS


def evaluate(module, inputs, check=False, max_tensor_bytes=DEFAULT_MAX_TENSOR_BYTES, max_while_trips=None):
    """Run the entry computation of ``module`` on ``inputs``.

    ``inputs`` are arrays for the entry parameters in parameter-number order
    (tuple-shaped parameters take their leaves in order). Returns the result's
    array leaves, flattened (a non-tuple result gives a one-element list).
    ``check=True`` verifies every instruction's value against its shape.
    ``max_while_trips`` bounds the while-loop trips of the whole evaluation
    (all loops together; None = no bound): past it, EvaluationLimitError.
    """
    ev = Evaluator(module, check=check, max_tensor_bytes=max_tensor_bytes, max_while_trips=max_while_trips)
    return ev.evaluate_entry(inputs)


def evaluate_ranks(module, inputs_per_rank, space=None, **kw):
    """[outputs of rank d for d in range(space.size)]; ``inputs_per_rank[d]`` are rank d's entry
    inputs (as ``evaluate`` takes them), ``space`` the module's ``hlo.ranks.rank_space`` by default.
    Each rank runs in its own thread, meeting at the collectives (``neuronxcc.collectives.rendezvous``);
    a collective some rank never reaches is a CollectiveError, not a hang. Keyword arguments go to
    ``Evaluator``."""
    from neuronxcc.collectives import run_ranks
    from neuronxcc.hlo.ranks import rank_space

    sp = space or rank_space(module)
    if len(inputs_per_rank) != sp.size:
        raise HloVerifyError("the program runs on %d ranks (%r), inputs were given for %d"
                             % (sp.size, sp, len(inputs_per_rank)))

    def one(rank, rv):
        ev = Evaluator(module, **kw)
        ev.rank, ev.space, ev.rv = rank, sp, rv
        return ev.evaluate_entry(inputs_per_rank[rank])

    return run_ranks(sp.size, one)


class _Plan(object):
    __slots__ = ("comp", "steps", "params", "consts", "root", "nslots", "lifted")


class Evaluator(object):
    """Evaluates the computations of one module; caches a plan per computation.

    ``rank`` / ``space`` / ``rv``: this evaluator's global device id, the module's
    ``RankSpace`` (None: from the module) and the ``Rendezvous`` of an N-rank run
    (``evaluate_ranks``); one rank needs none."""

    rank = 0
    space = None
    rv = None

    def __init__(self, module, check=False, max_tensor_bytes=DEFAULT_MAX_TENSOR_BYTES, max_while_trips=None):
        self.module = module
        self.check = check
        self.max_tensor_bytes = max_tensor_bytes
        self.max_while_trips = max_while_trips   # None: unbounded
        self.while_trips = 0                     # trips of every while loop run so far
        self._plans = {}
        self._lifted_plans = {}
        self._by_name = None
        self.cache = {}        # per-computation facts handlers derive once (reducer kinds, ...)

    # --- entry ------------------------------------------------------------

    def prepare(self):
        """Build the entry computation's plan now (else the first evaluation builds it)."""
        entry = self.module.entry
        if id(entry) not in self._plans:
            self._plans[id(entry)] = self._build_plan(entry, lifted=False)
        return self

    def evaluate_entry(self, inputs):
        entry = self.module.entry
        params = list(entry.parameters)
        leaves = list(inputs)
        args = []
        pos = 0
        for p in params:
            v, pos = _take_leaves(p.shape, leaves, pos, p)
            args.append(v)
        if pos != len(leaves):
            raise HloVerifyError("the entry computation %s takes %d input arrays, %d were given"
                                 % (entry.name, pos, len(leaves)))
        with np.errstate(all="ignore"), single_threaded_blas():
            return flatten_value(self.run(entry, args))

    # --- computations -----------------------------------------------------

    def resolve_computation(self, ref):
        if isinstance(ref, str):
            if self._by_name is None:
                comps = self.module.computations
                self._by_name = dict(comps) if isinstance(comps, dict) else {c.name: c for c in comps}
            try:
                return self._by_name[ref]
            except KeyError:
                raise HloVerifyError("unknown computation %r" % ref)
        return ref

    def run(self, comp, args):
        """Evaluate computation ``comp`` on operand values ``args``."""
        plan = self._plans.get(id(comp))
        if plan is None:
            plan = self._plans[id(comp)] = self._build_plan(comp, lifted=False)
        return self._execute(plan, args)

    def apply(self, comp, args):
        """Apply scalar computation ``comp`` elementwise over arrays ``args``.

        Arrays broadcast against each other; returns an array (or a tuple of
        arrays for a tuple-valued computation).
        """
        plan = self._lifted_plan(comp)
        if plan is not None:
            out = self._execute(plan, [np.asarray(a) for a in args])
            return _broadcast_out(out, args)
        return self._apply_elementwise(comp, args)

    def _lifted_plan(self, comp):
        key = id(comp)
        if key not in self._lifted_plans:
            try:
                self._lifted_plans[key] = self._build_plan(comp, lifted=True)
            except NotLiftable:
                self._lifted_plans[key] = None
        return self._lifted_plans[key]

    def apply_values(self, comp, args, insts):
        """Lift ``comp`` over arrays ``args`` like ``apply`` and return the values of
        ``insts`` (instructions of ``comp``), or None when ``comp`` cannot be lifted."""
        plan = self._lifted_plan(comp)
        if plan is None:
            return None
        vals = self._execute(plan, [np.asarray(a) for a in args], keep=True)
        slots = {id(i): k for k, i in enumerate(comp.instructions)}
        return [vals[slots[id(i)]] for i in insts]

    def _apply_elementwise(self, comp, args):
        arrs = np.broadcast_arrays(*[np.asarray(a) for a in args])
        shape = arrs[0].shape if arrs else ()
        outs = None
        n = int(np.prod(shape, dtype=np.int64))
        flat = [a.reshape(-1) for a in arrs]
        results = []
        for k in range(n):
            results.append(self.run(comp, [f[k:k + 1].reshape(()) for f in flat]))
        rs = comp.root.shape
        if is_tuple_shape(rs):
            outs = []
            for t, ts in enumerate(rs.tuple_shapes):
                a = np.empty(n, dtype=dtype_of(ts))
                for k in range(n):
                    a[k] = results[k][t]
                outs.append(a.reshape(shape))
            return tuple(outs)
        a = np.empty(n, dtype=dtype_of(rs))
        for k in range(n):
            a[k] = results[k]
        return a.reshape(shape)

    def _execute(self, plan, args, keep=False):
        vals = [None] * plan.nslots
        params = plan.params
        if len(args) != len(params):
            raise HloVerifyError("computation %s takes %d arguments, got %d"
                                 % (plan.comp.name, len(params), len(args)))
        for slot, num in params:
            vals[slot] = args[num]
        for slot, v in plan.consts:
            vals[slot] = v
        check = self.check and not plan.lifted
        inst = None
        try:
            for slot, fn, opslots, inst, dead in plan.steps:
                v = fn([vals[j] for j in opslots])
                if check:
                    _check_value(inst, v)
                vals[slot] = v
                if not keep:
                    for j in dead:
                        vals[j] = None
        except (CompilerError, NotLiftable, RecursionError, MemoryError):
            raise
        except Exception as e:
            # numpy refusing an operation here means the module and the handler disagree
            raise InternalCompilerError("interpreter failed at instruction %s (%s) in %s: %s: %s"
                                        % (getattr(inst, "name", "?"), getattr(inst, "opcode", "?"),
                                           plan.comp.name, type(e).__name__, e)) from e
        return vals if keep else vals[plan.root]

    # --- plans ------------------------------------------------------------

    def _build_plan(self, comp, lifted):
        insts = list(comp.instructions)
        slot_of = {}
        for k, inst in enumerate(insts):
            slot_of[id(inst)] = k
        root = comp.root
        if id(root) not in slot_of:
            raise HloVerifyError("computation %s: root %s is not one of its instructions"
                                 % (comp.name, getattr(root, "name", root)))
        plan = _Plan()
        plan.comp = comp
        plan.lifted = lifted
        plan.nslots = len(insts)
        plan.root = slot_of[id(root)]
        plan.params = []
        plan.consts = []
        steps = []
        last_use = {}
        for k, inst in enumerate(insts):
            for op in inst.operands:
                j = slot_of.get(id(op))
                if j is None or j >= k:
                    raise HloVerifyError("instruction %s in %s uses %s, which is not defined before it"
                                         % (inst.name, comp.name, getattr(op, "name", op)))
                last_use[j] = k
        nparams = 0
        for k, inst in enumerate(insts):
            opc = inst.opcode
            if lifted:
                _check_liftable(inst)
            elif not is_tuple_shape(inst.shape) and inst.shape.element_type != "token":
                nbytes = shape_bytes(inst.shape)
                if nbytes > self.max_tensor_bytes:
                    raise TensorTooLargeError(
                        "instruction %s has shape %s (%d bytes), larger than the %d bytes one tensor may take"
                        % (inst.name, _shape_str(inst.shape), nbytes, self.max_tensor_bytes))
            if opc == "parameter":
                plan.params.append((k, int(inst.parameter_number)))
                nparams += 1
                continue
            if opc == "constant":
                plan.consts.append((k, _literal(inst)))
                continue
            fn = self._handler_for(inst, comp, lifted)
            opslots = tuple(slot_of[id(op)] for op in inst.operands)
            steps.append([k, fn, opslots, inst, ()])
        # the slots whose last use is step k die after it (never the root)
        dead_after = {}
        for j, k in last_use.items():
            if j != plan.root:
                dead_after.setdefault(k, []).append(j)
        for st in steps:
            st[4] = tuple(dead_after.get(st[0], ()))
        plan.steps = [tuple(st) for st in steps]
        plan.params.sort(key=lambda t: t[1])
        nums = [n for _, n in plan.params]
        if nums != list(range(nparams)):
            raise HloVerifyError("computation %s: parameter numbers %s are not 0..%d"
                                 % (comp.name, nums, nparams - 1))
        plan.params = [(slot, i) for i, (slot, _) in enumerate(plan.params)]
        return plan

    def _handler_for(self, inst, comp, lifted):
        """The step function ``f(args) -> value`` for ``inst``: a handler bound to the
        instruction, or the closure its preparer builds once (attributes parsed)."""
        opc = inst.opcode
        op = _ops.OPS.get(opc)
        if op is None:
            raise _ops.unsupported_error(inst, comp)
        if lifted and opc in _SCALAR_IDENTITY:
            return _identity
        if lifted and opc in ("call", "fusion"):
            return functools.partial(_call_lifted, self, inst)
        name = op.handler
        if opc == "custom-call":
            tgt = _ops.custom_call_target(inst)
            if tgt not in _ops.CUSTOM_CALL_TARGETS:
                raise _ops.unsupported_error(inst, comp)
            name = _ops.CUSTOM_CALL_TARGETS[tgt]
        prep = PREPARERS.get(name)
        if prep is not None:
            fn = prep(self, inst)
            if fn is not None:
                return fn
        fn = HANDLERS.get(name)
        if fn is None:
            raise InternalCompilerError("interpreter handler %r for %s is missing" % (name, opc))
        return functools.partial(fn, self, inst)


def _identity(args):
    return args[0]


def _call_lifted(ev, inst, args):
    ref = inst.attrs.get("to_apply")
    if ref is None:
        ref = inst.attrs.get("calls")
    comp = ev.resolve_computation(ref if ref is not None else inst.called_computations[0])
    return ev.apply(comp, args)


def _check_liftable(inst):
    s = inst.shape
    if is_tuple_shape(s):
        if any(is_tuple_shape(t) or len(t.dims) for t in s.tuple_shapes):
            raise NotLiftable(inst.name)
    elif s.element_type != "token" and len(s.dims):
        raise NotLiftable(inst.name)
    opc = inst.opcode
    op = _ops.OPS.get(opc)
    if op is None:
        raise NotLiftable(inst.name)
    if opc in _SCALAR_IDENTITY or opc in _LIFTABLE_OPS or op.category in _LIFTABLE_CATEGORIES:
        return
    raise NotLiftable(inst.name)


def _broadcast_out(out, args):
    """Results of a lifted computation that did not touch every argument
    (e.g. a constant root) still take the arguments' broadcast shape."""
    shape = np.broadcast_shapes(*[np.shape(a) for a in args]) if args else ()
    if isinstance(out, tuple):
        return tuple(_bcast(o, shape) for o in out)
    return _bcast(out, shape)


def _bcast(o, shape):
    o = np.asarray(o)
    if o.shape != shape:
        o = np.broadcast_to(o, shape)
    return o


def _literal(inst):
    lit = inst.literal
    if is_tuple_shape(inst.shape):
        return _tuple_literal(lit, inst.shape)
    if lit is None:
        raise HloVerifyError("constant %s has no value" % inst.name)
    a = np.asarray(lit)
    dt = dtype_of(inst.shape)
    a = cast(a, dt)
    dims = dims_of(inst.shape)
    if a.shape != dims:
        if a.size == int(np.prod(dims, dtype=np.int64)):
            a = a.reshape(dims)
        elif a.size == 1:
            a = np.broadcast_to(a.reshape(()), dims)
        else:
            raise HloVerifyError("constant %s: value has shape %s, expected %s"
                                 % (inst.name, a.shape, _shape_str(inst.shape)))
    a = a.view()                  # read-only view; the model's own array is left alone
    a.flags.writeable = False
    return a


def _tuple_literal(lit, shape):
    out = []
    for v, s in zip(lit, shape.tuple_shapes):
        if is_tuple_shape(s):
            out.append(_tuple_literal(v, s))
        else:
            out.append(cast(np.asarray(v), dtype_of(s)).reshape(dims_of(s)))
    return tuple(out)


def _take_leaves(shape, leaves, pos, param):
    if is_tuple_shape(shape):
        vals = []
        for s in shape.tuple_shapes:
            v, pos = _take_leaves(s, leaves, pos, param)
            vals.append(v)
        return tuple(vals), pos
    if shape.element_type == "token":
        return TOKEN, pos
    if pos >= len(leaves):
        raise HloVerifyError("missing input for parameter %d (%s %s)"
                             % (param.parameter_number, param.name, _shape_str(shape)))
    a = np.asarray(leaves[pos])
    dt = dtype_of(shape)
    dims = dims_of(shape)
    if a.shape != dims:
        raise HloVerifyError("input %d for parameter %s has shape %s, expected %s"
                             % (pos, param.name, list(a.shape), _shape_str(shape)))
    if a.dtype != dt:
        if not np.can_cast(a.dtype, dt, casting="same_kind") and not (a.dtype.kind in "iub" and dt.kind in "iub"):
            raise HloVerifyError("input %d for parameter %s has dtype %s, expected %s"
                                 % (pos, param.name, a.dtype, shape.element_type))
        a = a.astype(dt)
    return a, pos + 1


def _shape_str(shape):
    if is_tuple_shape(shape):
        return "(%s)" % ", ".join(_shape_str(s) for s in shape.tuple_shapes)
    return "%s[%s]" % (shape.element_type, ",".join(str(d) for d in shape.dims))


def _check_value(inst, v):
    s = inst.shape
    if is_tuple_shape(s):
        if not isinstance(v, tuple) or len(v) != len(s.tuple_shapes):
            raise InternalCompilerError("interpreter: %s (%s) produced %r, expected a %d-tuple"
                                        % (inst.name, inst.opcode, type(v), len(s.tuple_shapes)))
        for x, ts in zip(v, s.tuple_shapes):
            _check_leaf(inst, x, ts)
        return
    _check_leaf(inst, v, s)


def _check_leaf(inst, v, s):
    if s.element_type == "tuple":
        if not isinstance(v, tuple):
            raise InternalCompilerError("interpreter: %s produced a non-tuple for a tuple" % inst.name)
        return
    if s.element_type == "token":
        if v is not TOKEN:
            raise InternalCompilerError("interpreter: %s produced %r for a token" % (inst.name, v))
        return
    if not isinstance(v, np.ndarray) or v.dtype != dtype_of(s) or v.shape != dims_of(s):
        raise InternalCompilerError(
            "interpreter: %s (%s) produced %s %s, expected %s"
            % (inst.name, inst.opcode, getattr(v, "dtype", type(v)), getattr(v, "shape", None), _shape_str(s)))
