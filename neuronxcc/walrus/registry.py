"""The walrus pass registry and the pipeline runner.

Owns: the mapping pass name -> pass object, the pass contract, the analysis
cache and the loop that runs a list of passes over one BIR module. What each
pass is (gates, options, analyses) is declared in ``pass_names.PIPELINE``.

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
from neuronxcc.walrus.pass_names import PASS_NAMES

log = logging.getLogger("neuronxcc.walrus")

_REGISTRY = {}


class WalrusPass:
    """Base class. Subclasses set ``name`` and override ``run``."""

    name = None

    @property
    def spec(self):
        """The pass's row of the table (``pass_names.PassSpec``)."""
        return PN.SPECS[self.name]

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


class PassContext:
    """What a pass may read besides the module.

    target       -- ``neuronxcc.hwm.TargetModel``
    goldens      -- path of goldens.npz or None
    options      -- dict of tunables: the keys the pass table declares (``pass_names``),
                    with their defaults; any other key is refused
    metrics      -- dict the print_metrics pass fills (written by the driver)
    analyses     -- cache of analysis results keyed by name (or (name, variant)); read
                    through ``analysis``; the runner drops entries when a pass changes
                    the module
    analysis_runs -- analysis name -> how many times it was computed
    timings      -- list of (pass name, seconds, changed)
    """

    def __init__(self, target, goldens=None, options=None):
        self.target = target
        self.goldens = goldens
        self.options = PN.default_options()
        bad = sorted(set(options or ()) - set(self.options))
        if bad:
            raise errors.InvalidArgumentError(
                "unknown walrus option%s %s (known: %s)" % ("s" if len(bad) > 1 else "", ", ".join(bad),
                                                              ", ".join(sorted(self.options))), code="NCC_EARG011")
        self.options.update(options or {})
        self.metrics = {}
        self.analyses = {}
        self.analysis_runs = {}
        self.timings = []
        self.current = None         # the pass the runner is running (its row's ``needs`` are checked)

    def _check(self, name):
        base = name[0] if isinstance(name, tuple) else name
        if self.current is not None and base not in PN.SPECS[self.current].needs:
            raise errors.InternalCompilerError(
                "walrus pass %s reads analysis %r that its pass-table row does not declare"
                % (self.current, base))
        return base

    def analysis(self, name, compute):
        """The cached analysis ``name``, computed by ``compute()`` when the cache has none."""
        self._check(name)
        v = self.analyses.get(name)
        if v is None:
            v = compute()
            self.analyses[name] = v
            self.count_analysis(name)
        return v

    def cached(self, name):
        """The cached analysis ``name`` or None (no computation)."""
        self._check(name)
        return self.analyses.get(name)

    def store(self, name, value):
        """Cache ``value`` as analysis ``name`` (computed by the caller) and count the computation."""
        self._check(name)
        self.analyses[name] = value
        self.count_analysis(name)

    def count_analysis(self, name):
        key = name[0] if isinstance(name, tuple) else name
        self.analysis_runs[key] = self.analysis_runs.get(key, 0) + 1


def invalidate(ctx, preserves=()):
    """Drop every cached analysis whose name is not in ``preserves``."""
    for k in list(ctx.analyses):
        if (k[0] if isinstance(k, tuple) else k) not in preserves:
            del ctx.analyses[k]


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
