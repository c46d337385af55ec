"""Lazy matmul leaves (``__mm__k`` views, penguin/mmfuse.py): what rows and tiles need of them
without importing mmfuse -- recognising a leaf, and materialising it (the matmul computed once
into a scratch tensor by the ordinary matmul kernel) for code that does not evaluate matmuls
inside its row tiles. ``cg.mmred[base]`` is the leaf's ``mmfuse.RowMatmul``."""
from neuronxcc.errors import InternalCompilerError
from neuronxcc.starfish.penguin.expr import apply_view, leaves
from neuronxcc.starfish.penguin.views import View

__all__ = ["MM_PREFIX", "is_mm_leaf", "mm_leaves", "resolve", "materialise_mm", "materialised_view"]

MM_PREFIX = "__mm__"


def is_mm_leaf(v):
    return isinstance(v, View) and v.base.startswith(MM_PREFIX)


def mm_leaves(x):
    return [v for v in leaves(x) if is_mm_leaf(v)]


def resolve(cg, x, only=None):
    """x with its matmul leaves (those in ONLY, default all) materialised and renamed to their tensors."""
    todo = {}
    for v in mm_leaves(x):
        if only is not None and v.base not in only:
            continue
        todo[v.base] = materialise_mm(cg, v.base)
    if not todo:
        return x
    return apply_view(x, lambda v: View(todo[v.base], v.dtype, v.shape, v.strides, v.offset)
                      if v.base in todo else v)


def materialise_mm(cg, base):
    info = cg.mmred[base]
    if info.tensor is None:
        t = cg.em.tensor("mm", "scratch", info.dtype, (info.M, info.N))
        L = cg.materialise(info.L)
        if not (isinstance(L, View) and L.shape == (info.M, info.K)):
            L = cg.materialise(info.L, allow_views=False)
        cg.k.matmul_terms([(L, info.R, info.K)], View.contiguous(t, info.dtype, (info.M, info.N)), 0,
                          info.M, info.N)
        info.tensor = t
    return info.tensor



def materialised_view(cg, v):
    """Leaf V as a view of the tensor its matmul was materialised into, for a kernel that does not
    evaluate matmuls inline (an internal error when nothing materialised it first)."""
    info = cg.mmred[v.base]
    if info.tensor is None:
        raise InternalCompilerError("the matmul result %s is read by a kernel that does not evaluate matmuls "
                                    "inline (it should have been resolved first)" % v.base)
    return View(info.tensor, v.dtype, v.shape, v.strides, v.offset)
