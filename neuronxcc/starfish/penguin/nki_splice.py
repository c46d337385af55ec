"""Penguin codegen for the ``nki_kernel`` op: an NKI kernel's BIR spliced into the program.

hlo2penguin turns an ``AwsNeuronCustomNativeKernel`` custom-call into one ``nki_kernel`` op
whose attrs carry the traced kernel's BIR module and the binding of its HBM tensors to the
op's operands and results (``neuronxcc.hlo.nki_call``). Lowering it here:

  * every operand becomes a whole, contiguous HBM tensor of the kernel's shape and dtype
    (an input tensor or a materialised scratch as it is; a lazy or strided value is first
    computed into a fresh scratch);
  * every result gets its HBM tensor (the program's output tensor when the result is one,
    else a scratch); a result that aliases an operand is first filled with the operand;
  * the kernel's body is copied in at the current point of the program (inside loops,
    branches and ``call``ed computations alike), its I/O tensor names replaced by the bound
    program tensors and everything else it names (scratch/const HBM tensors, memlocs, loop
    variables, registers, semaphores) renamed to fresh program names, so two calls of one
    kernel, or of two kernels, never share storage. Memlocs the kernel allocated directly
    are handed to walrus unallocated (walrus places the whole program); every instruction's
    debug name becomes the custom-call's name, suffixed with the kernel's own label.

The kernel then goes through walrus with the rest of the program: dependences on the HBM
tensors it shares with the neighbouring kernels order it, and ``bir_sim`` checks the whole
program against the goldens (the HLO interpreter runs the kernel alone on birsim).
"""
import logging

from neuronxcc.errors import InternalCompilerError
from neuronxcc.starfish import birpy
from neuronxcc.starfish.penguin.views import View

log = logging.getLogger("neuronxcc.penguin.nki")


class NkiSpliceMixin:
    """``op_nki_kernel`` for the codegen's kernel set (mixed into ``codegen.make_kernels``)."""

    def op_nki_kernel(self, op, args, outs):
        cg, em = self.cg, self.em
        a = op.attrs
        frag = birpy.from_json(a["bir"])
        in_names, out_names = list(a["input_names"]), list(a["output_names"])
        aliases = {int(k): int(v) for k, v in a.get("aliases") or ()}
        bound = {}
        for name, x in zip(in_names, args):
            bound[name] = self._whole_tensor(x, frag.tensors[name])
        results = []
        for k, (name, o) in enumerate(zip(out_names, outs)):
            view = cg.target_for(o.name)
            if k in aliases:
                src = args[aliases[k]]
                self.elementwise(src, view)
            if name in bound and bound[name] != view.base:
                # the kernel reads and writes one tensor: it must be the result's
                if k not in aliases:
                    self.elementwise(View.contiguous(bound[name], o.dtype, o.shape), view)
            bound[name] = view.base
            results.append(view)
        splice_kernel(em, frag, bound, label=em.label or a.get("func_name"), prefix="nki_" + a.get("func_name", "k"))
        return results

    def _whole_tensor(self, x, t):
        """Name of an HBM tensor holding exactly x (shape and dtype of the kernel's tensor t)."""
        cg, em = self.cg, self.em
        if isinstance(x, View) and not x.base.startswith("__") and x.is_contiguous() and x.base in em.m.tensors:
            ht = em.m.tensors[x.base]
            if tuple(ht.shape) == tuple(t.shape) and ht.dtype == t.dtype and ht.dtype == x.dtype:
                return x.base
            if ht.num_elements() == t.num_elements() and ht.dtype == t.dtype == x.dtype:
                return x.base        # a reshape of the whole tensor: same row-major bytes
        tn = em.tensor("nki_arg", "scratch", t.dtype, tuple(t.shape))
        out = View.contiguous(tn, t.dtype, tuple(t.shape))
        self.elementwise(x, out)
        return tn


def splice_kernel(em, frag, bound, label=None, prefix="nki"):
    """Append FRAG's body at the emitter's current point, bound to the program.

    bound: {kernel I/O tensor name: program tensor name}. Everything else FRAG names gets a
    fresh program name (em.fresh)."""
    from neuronxcc import pelican
    m = em.m
    prefix = prefix.replace(".", "_")
    tmap = dict(bound)
    for name, t in frag.tensors.items():
        if name in tmap:
            continue
        if t.kind in ("input", "output"):
            # an I/O tensor the custom-call does not bind cannot happen after check_binding
            raise InternalCompilerError("NKI kernel tensor %r (%s) is not bound to a program tensor" % (name, t.kind))
        tmap[name] = em.tensor("%s_%s" % (prefix, name), t.kind, t.dtype, tuple(t.shape), data=t.data)
    stripped = 0
    for name, ml in frag.memlocs.items():
        new = em.fresh("%s_%s" % (prefix, name))
        m.add_memloc(new, ml.memory, ml.partitions, ml.bytes_per_partition)
        stripped += ml.allocated
        tmap[name] = new
    if stripped:
        log.info("NKI kernel %s: %d directly allocated memlocs are placed by walrus with the program",
                 prefix, stripped)
    # loop variables and registers: fresh names, substituted into every expression
    names = set()
    for n in frag.walk():
        if n.kind == "loop":
            names.add(n.var)
        elif n.kind == "inst" and n.opcode == "register_load":
            names.add(n.attrs["register"])
        elif n.kind in ("while", "if"):
            names.add(n.cond)
    vmap = {v: em.fresh("%s_%s" % (prefix, v)) for v in sorted(names)}
    subs = {v: pelican.var(nv) for v, nv in vmap.items()}

    def expr(e):
        if hasattr(e, "free_vars") and e.free_vars() & subs.keys():
            return e.subs({k: subs[k] for k in e.free_vars() if k in subs})
        return e

    def fix(node):
        if node.kind == "inst":
            for ap in node.dsts + node.srcs:
                ap.target = tmap.get(ap.target, ap.target)
                ap.offset = expr(ap.offset)
            if node.opcode == "register_load":
                node.attrs["register"] = vmap[node.attrs["register"]]
            node.waits = [("%s_%s" % (prefix, s), expr(v)) for s, v in node.waits]
            node.signals = [("%s_%s" % (prefix, s), v) for s, v in node.signals]
            node.name = "%s/%s" % (label, node.name) if node.name and label else (label or node.name)
            node.id = None
        else:
            node.id = None
            if node.kind == "loop":
                node.var = vmap[node.var]
            elif node.kind in ("while", "if"):
                node.cond = vmap[node.cond]
            for body in _bodies(node):
                for c in body:
                    fix(c)

    for n in frag.body:
        fix(n)
        em.b.body.append(n)


def _bodies(node):
    if node.kind == "if":
        return [node.then_body, node.else_body]
    return [node.body]
