"""Data-dependent control flow: HLO while and conditional as BIR While / If.

while: a loop-invariant value (the body returns its parameter unchanged, as
``lax.scan`` does with its stacked weights and ``xs``) is read in place from
the while's operand: no state tensor, no copy. Every other loop-carried value
gets an HBM state tensor: the operand's own scratch tensor when the while is
that value's only use (updated in place), else a fresh one initialised from
the operand. The condition sub-graph is lowered to a bool scalar in HBM and
read into a register (``register_load``); ``While(reg)`` runs the body
sub-graph, whose changed results are first computed into temporaries (the body
may read any state value) and then copied into the state, and reloads the
register from the condition at the end of each trip.

conditional: the branch results are written into shared result tensors;
a pred selects ``If(reg) then branch 0 else branch 1``; an index selects a
chain of Ifs on ``index == k`` (out-of-range indices run the last branch,
like XLA).
"""
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.tiles import cannot_lower
from neuronxcc.starfish.penguin.views import Splat, View


class ControlMixin:
    def _as_int32(self, x):
        """x as an int32 View in HBM (register_load reads one int32 element)."""
        if x.dtype != "int32":
            x = Node("convert", [x], {}, "int32", x.shape)
        if isinstance(x, View) and not x.base.startswith("__"):
            return x
        return self.cg.materialise(x, allow_views=False)

    def _scalar_register(self, x):
        """Register name holding bool/int scalar x (x materialised into a one-element HBM tensor)."""
        v = self._as_int32(x)
        name = self.em.fresh("c")
        self._load_named_register(name, v)
        return name

    def _load_named_register(self, name, v):
        off = v.offset if not isinstance(v.offset, int) else self.P.const(v.offset)
        self.em.inst("register_load", "SP", [], [self.em.hbm(v.base, off, [[1, 1]])], register=name,
                     min=-(2 ** 31), max=2 ** 31 - 1)

    def _cond_value(self, cond_g, state):
        (c,) = self.cg.lower_subgraph(cond_g, state)
        return self._as_int32(c)

    def op_while(self, op, args, outs):
        cond_g, body_g = op.attrs["cond"], op.attrs["body"]
        if len(args) != len(body_g.inputs) or len(outs) != len(args):
            raise cannot_lower(op, "operand/result mismatch")
        invariant = loop_invariant(body_g)
        state = []
        taken = set()
        for k, (o, a) in enumerate(zip(outs, args)):
            if k in invariant:
                state.append(self.cg.materialise(a))      # read in place (computed once if lazy)
                continue
            sv = self._reusable_state(op, k, a, o, taken)
            if sv is None:
                t = self.em.tensor("state_" + o.name, "scratch", o.dtype, o.shape)
                sv = View.contiguous(t, o.dtype, o.shape)
                self.elementwise(a, sv)
            taken.add(sv.base)
            state.append(sv)
        reg = self.em.fresh("w")
        c = self._cond_value(cond_g, list(state))
        self._load_named_register(reg, c)
        with self.em.b.while_(reg):
            res = self.cg.lower_subgraph(body_g, list(state))
            tmps = []
            for k, (r, sv) in enumerate(zip(res, state)):
                if k in invariant or (isinstance(r, View) and r.base == sv.base and r.is_contiguous()):
                    tmps.append(None)          # unchanged loop-carried value
                    continue
                tmps.append(self.cg.materialise(r, allow_views=False))
            for k, (t, sv) in enumerate(zip(tmps, state)):
                if t is not None and k not in invariant:
                    self.elementwise(t, sv)
            c = self._cond_value(cond_g, list(state))
            self._load_named_register(reg, c)
        return list(state)

    def _reusable_state(self, op, k, a, o, taken):
        """The operand's own scratch tensor as the state of loop-carried value k, when the
        while is the operand's only use (so updating it in place is invisible), else None."""
        cg = self.cg
        name = op.inputs[k]
        if not isinstance(a, View) or a.base in taken or a.base.startswith("__") or not a.is_contiguous():
            return None
        t = self.em.m.tensors.get(a.base)
        if t is None or t.kind != "scratch" or t.dtype != o.dtype or tuple(t.shape) != tuple(o.shape) \
                or a.offset != 0 or a.dtype != o.dtype:
            return None
        if cg.scratch_owner.get(a.base) != name or op.inputs.count(name) != 1 or [u for u in cg.users.get(name, []) if u is not op] \
                or name in cg.g.outputs or name in cg.out_tensor:
            return None
        return a

    def op_conditional(self, op, args, outs):
        branches = op.attrs["branches"]
        sel = args[0]
        rest = list(args[1:])
        per = []
        for g in branches:
            n = len(g.inputs)
            per.append(rest[:n])
            rest = rest[n:]
        targets = [self.cg.target_for(o.name) for o in outs]

        def run(k):
            res = self.cg.lower_subgraph(branches[k], per[k])
            for r, t in zip(res, targets):
                self.elementwise(r, t)

        if sel.dtype == "bool" and len(branches) == 2:
            reg = self._scalar_register(sel)
            with self.em.b.if_(reg):
                run(0)
            with self.em.b.else_():
                run(1)
            return targets

        def chain(k):
            if k == len(branches) - 1:
                run(k)
                return
            eq = Node("compare", [sel, Splat(k, sel.dtype, ())], {"direction": "EQ"}, "bool", (), None)
            reg = self._scalar_register(eq)
            with self.em.b.if_(reg):
                run(k)
            with self.em.b.else_():
                chain(k + 1)

        chain(0)
        return targets


def loop_invariant(body_g):
    """Indices of the loop-carried values a while body returns unchanged: its result k is its
    parameter k itself or a copy of it."""
    prod = body_g.producers()
    out = set()
    for k, (i, o) in enumerate(zip(body_g.inputs, body_g.outputs)):
        seen = 0
        while o != i and o in prod and prod[o].kind == "copy" and len(prod[o].inputs) == 1 and seen < 8:
            o = prod[o].inputs[0]
            seen += 1
        if o == i and body_g.values[o].shape == body_g.values[body_g.outputs[k]].shape:
            out.add(k)
    return out
