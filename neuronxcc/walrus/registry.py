"""The walrus pass registry and the pipeline runner.

Owns: the mapping pass name -> pass object (filled once from the pass package's
explicit ``PASSES`` / ``NOOPS`` lists: registration is not an import side
effect) and the loop that runs a list of passes over one BIR module. What each
pass is (gates, options, analyses) is declared in ``pass_names.PIPELINE``; the
base class and ``PassContext`` are in ``contract`` (which the passes import, so
the registry -> passes import has no way back).

Contract (XLA's ``HloPassInterface`` / numba's ``register_pass``):
  * a pass has a ``name`` (one of the table's; registering any other name,
    or a name twice, is an error) and ``run(module, ctx) -> bool`` that says
    whether the module changed;
  * a pass reads only the options its table row declares (``PassContext``
    refuses unknown keys) and only the cached analyses it declares it needs
    (``PassContext.analysis`` refuses others while the runner runs it);
  * a pass that does nothing on a target says so through ``noop_reason(ctx)``
    (shown by ``walrus_driver --list-passes``) instead of pretending to work;
  * the runner, not the passes, invalidates analyses: after a pass changed
    the module it drops every cached analysis the pass's row does not list
    as preserved; it times every pass (``ctx.timings``, logged), runs the BIR
    verifier after every changing pass with ``verify_between_passes``, and
    wraps every failure as ``Failed in walrus pipeline (step: <pass>): <message>``.
"""
import logging
import time
import traceback

from neuronxcc import errors
from neuronxcc.walrus import pass_names as PN
from neuronxcc.walrus.contract import NoOpPass, PassContext, WalrusPass, invalidate  # noqa: F401 (re-exported)
from neuronxcc.walrus.pass_names import PASS_NAMES

log = logging.getLogger("neuronxcc.walrus")

_REGISTRY = {}
_LOADED = False


def register(cls_or_obj):
    """Register a pass class (instantiated with no arguments) or pass object."""
    obj = cls_or_obj() if isinstance(cls_or_obj, type) else cls_or_obj
    name = obj.name
    if name not in PASS_NAMES:
        raise ValueError("walrus pass %r is not in pass_names.PASS_NAMES" % (name,))
    if name in _REGISTRY:
        raise ValueError("walrus pass %r registered twice" % (name,))
    _REGISTRY[name] = obj
    return cls_or_obj


def register_noop(name, reason):
    register(NoOpPass(name, reason))


def _load_all():
    """Fill the registry from the pass package's explicit lists (``passes.PASSES``, ``passes.NOOPS``)
    the first time a pass is asked for. Importing a pass module registers nothing."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from neuronxcc.walrus import passes
    for cls in passes.PASSES:
        register(cls)
    for name, why in passes.NOOPS.items():
        register_noop(name, why)


def get_pass(name):
    PN.check_names([name])
    _load_all()
    return _REGISTRY[name]


def all_passes():
    """(name, pass) in the canonical order of ``PASS_NAMES``."""
    _load_all()
    return [(n, _REGISTRY[n]) for n in PASS_NAMES if n in _REGISTRY]


def parse_pass_list(text):
    """``'a,b , c'`` -> ['a','b','c']; every name checked against the pass table."""
    return PN.check_names([t.strip() for t in str(text).split(",") if t.strip()])


def _verify(module, ctx):
    get_pass("birverifier").run(module, ctx)


def run_passes(module, names, ctx):
    """Run ``names`` in order over ``module`` (in place). Returns True if any changed."""
    any_changed = False
    for name in names:
        p = get_pass(name)
        t0 = time.perf_counter()
        try:
            ctx.current = name
            try:
                changed = bool(p.run(module, ctx))
            finally:
                ctx.current = None
            if changed:
                invalidate(ctx, p.spec.preserves)
            if changed and ctx.options["verify_between_passes"] and name != "birverifier":
                _verify(module, ctx)
        except errors.CompilerError as e:
            log.debug("walrus pass %s failed:\n%s", name, traceback.format_exc())
            e.message = "Failed in walrus pipeline (step: %s): %s" % (name, e.message)
            e.args = (e.message,)
            raise
        except Exception as e:  # a bug in a pass: keep the traceback in the log
            log.error("walrus pass %s crashed:\n%s", name, traceback.format_exc())
            raise errors.InternalCompilerError(
                "Failed in walrus pipeline (step: %s): %s: %s" % (name, type(e).__name__, e)) from e
        dt = time.perf_counter() - t0
        ctx.timings.append((name, dt, changed))
        reason = p.noop_reason(ctx)
        log.info("walrus pass %-26s %8.3f ms  %s", name, dt * 1e3,
                 "no-op (%s)" % reason if reason else ("changed" if changed else "unchanged"))
        any_changed |= changed
    return any_changed
