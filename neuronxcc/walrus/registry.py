"""The walrus pass registry and the pipeline runner.

Owns: the mapping pass name -> pass object, the pass contract and the loop
that runs a list of passes over one BIR module.

Contract (XLA's ``HloPassInterface`` / numba's ``register_pass``):
  * a pass has a ``name`` (one of ``pass_names.PASS_NAMES``; registering any
    other name, or a name twice, is an error) and ``run(module, ctx) -> bool``
    that says whether the module changed;
  * a pass that does nothing on a target says so through ``noop_reason(ctx)``
    (shown by ``walrus_driver --list-passes``) instead of pretending to work;
  * the runner times every pass (``ctx.timings``, logged), can run the BIR
    verifier between passes, drops cached analyses when a pass changed the
    module, and wraps every failure as
    ``Failed in walrus pipeline (step: <pass>): <message>``.
"""
import logging
import time
import traceback

from neuronxcc import errors
from neuronxcc.walrus.pass_names import PASS_NAMES

log = logging.getLogger("neuronxcc.walrus")

_REGISTRY = {}


class WalrusPass:
    """Base class. Subclasses set ``name`` and override ``run``."""

    name = None
    # passes whose results other passes read through ``ctx.analyses``
    is_analysis = False
    # cached analyses still valid after this pass changed the module (the runner drops the rest)
    preserves = ()

    def run(self, module, ctx):  # pragma: no cover - interface
        raise NotImplementedError

    def noop_reason(self, ctx):
        """None when the pass does real work on ``ctx.target``; else why it is a no-op."""
        return None

    @property
    def description(self):
        return PASS_NAMES.get(self.name, "")


class NoOpPass(WalrusPass):
    """A seed pass with nothing to do in this reimplementation; it says why."""

    def __init__(self, name, reason):
        self.name = name
        self.reason = reason

    def run(self, module, ctx):
        return False

    def noop_reason(self, ctx):
        return self.reason


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
    # Importing the pass modules registers them. Kept in one place so the
    # registry is complete whoever asks first.
    from neuronxcc.walrus import passes  # noqa: F401


def get_pass(name):
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        if name in PASS_NAMES:
            raise errors.NotBuiltYetError("walrus pass '%s' is not built yet" % name) from None
        raise errors.InvalidArgumentError(
            "Unknown walrus pass '%s'; walrus_driver --list-passes shows the %d known passes"
            % (name, len(PASS_NAMES)), code="NCC_EARG010") from None


def all_passes():
    """(name, pass) in the canonical order of ``PASS_NAMES``."""
    _load_all()
    return [(n, _REGISTRY[n]) for n in PASS_NAMES if n in _REGISTRY]


def parse_pass_list(text):
    """``'a,b , c'`` -> ['a','b','c']; every name checked against the registry."""
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    for n in names:
        get_pass(n)
    return names


class PassContext:
    """What a pass may read besides the module.

    target       -- ``neuronxcc.hwm.TargetModel``
    goldens      -- path of goldens.npz or None
    options      -- dict of tunables (see ``DEFAULT_OPTIONS``)
    metrics      -- dict the print_metrics pass fills (written by the driver)
    analyses     -- cache of analysis results keyed by name; cleared when a pass
                    reports a change
    timings      -- list of (pass name, seconds, changed)
    """

    DEFAULT_OPTIONS = {
        # unroll: loops with at most this many iterations and instructions once unrolled.
        # Default 1: only degenerate loops go, so the instruction count never depends on
        # tensor sizes (a loop of 2 tiles at one size is a loop of 32 at another).
        "unroll_max_trip": 1,
        "unroll_max_instructions": 64,
        "sim_budget_instructions": 200_000,  # bir_sim: skip above this many dynamic instructions
        "sim_budget_bytes": 64 << 20,    # bir_sim: skip when I/O tensors exceed this many bytes
        "verify_between_passes": False,
        "allocator_spill": True,
    }

    def __init__(self, target, goldens=None, options=None):
        self.target = target
        self.goldens = goldens
        self.options = dict(self.DEFAULT_OPTIONS)
        if options:
            self.options.update(options)
        self.metrics = {}
        self.analyses = {}
        self.analysis_runs = {}     # analysis name -> how many times it was computed
        self.timings = []

    def analysis(self, name, compute):
        """The cached analysis ``name``, computed by ``compute()`` when the cache has none."""
        v = self.analyses.get(name)
        if v is None:
            v = compute()
            self.analyses[name] = v
            self.count_analysis(name)
        return v

    def count_analysis(self, name):
        key = name[0] if isinstance(name, tuple) else name
        self.analysis_runs[key] = self.analysis_runs.get(key, 0) + 1


def _verify(module, ctx):
    from neuronxcc.walrus.passes.verify import verify_module
    verify_module(module, ctx)


def invalidate(ctx, preserves=()):
    """Drop every cached analysis whose name is not in ``preserves``."""
    for k in list(ctx.analyses):
        if (k[0] if isinstance(k, tuple) else k) not in preserves:
            del ctx.analyses[k]


def run_passes(module, names, ctx):
    """Run ``names`` in order over ``module`` (in place). Returns True if any changed."""
    any_changed = False
    for name in names:
        p = get_pass(name)
        t0 = time.perf_counter()
        try:
            changed = bool(p.run(module, ctx))
            if changed:
                invalidate(ctx, p.preserves)
            if changed and ctx.options.get("verify_between_passes") and name != "birverifier":
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
