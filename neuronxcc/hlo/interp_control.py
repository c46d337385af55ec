"""Interpreter handlers for control flow: call (and fusion, which calls its
fused computation), while, conditional, and the custom-call dispatcher.

conditional: a pred selector runs branch 0 (true_computation) when true and
branch 1 otherwise; an s32 selector runs branch i, any out-of-range index the
last branch (XLA semantics).
"""
import numpy as np

from neuronxcc.errors import EvaluationLimitError, HloVerifyError, source_location
from neuronxcc.hlo import ops as _ops
from neuronxcc.hlo.interp_attrs import attr, computation
from neuronxcc.hlo.interp_base import HANDLERS, handler


@handler("call")
def h_call(ev, inst, args):
    comp = attr(inst, "to_apply")
    if comp is None:
        comp = attr(inst, "calls")
    if comp is None:
        if not inst.called_computations:
            raise HloVerifyError("call %s names no computation" % inst.name)
        comp = inst.called_computations[0]
    return ev.run(ev.resolve_computation(comp), list(args))


@handler("while_loop")
def h_while(ev, inst, args):
    body = computation(ev, inst, "body")
    cond = computation(ev, inst, "condition")
    state = args[0]
    cap = ev.max_while_trips
    while bool(np.asarray(ev.run(cond, [state])).reshape(())):
        ev.while_trips += 1
        if cap is not None and ev.while_trips > cap:
            where = source_location(getattr(inst, "metadata", None))
            raise EvaluationLimitError(
                "while loop %s%s was still running after the program's while loops made %d trips in all "
                "on these inputs; it may never end (the limit is --max-while-trips)"
                % (inst.name, " (%s)" % where if where else "", cap))
        state = ev.run(body, [state])
    return state


@handler("conditional")
def h_conditional(ev, inst, args):
    branches = attr(inst, "branch_computations")
    if not branches:
        tc, fc = attr(inst, "true_computation"), attr(inst, "false_computation")
        branches = [tc, fc] if tc is not None else list(inst.called_computations)
    branches = [ev.resolve_computation(b) for b in branches]
    sel = np.asarray(args[0]).reshape(())
    if sel.dtype == np.bool_:
        if len(branches) != 2:
            raise HloVerifyError("conditional %s: a pred selector needs 2 branches" % inst.name)
        b = 0 if bool(sel) else 1
    else:
        b = int(sel)
        if b < 0 or b >= len(branches):
            b = len(branches) - 1
    if len(args) - 1 != len(branches):
        raise HloVerifyError("conditional %s: %d branch operands for %d branches"
                             % (inst.name, len(args) - 1, len(branches)))
    return ev.run(branches[b], [args[1 + b]])


@handler("custom_call")
def h_custom_call(ev, inst, args):
    tgt = _ops.custom_call_target(inst)
    name = _ops.CUSTOM_CALL_TARGETS.get(tgt)
    if name is None:
        raise _ops.unsupported_error(inst, getattr(inst, "parent", None))
    return HANDLERS[name](ev, inst, args)
