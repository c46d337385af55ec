"""birsim entry points: simulate a BIR module or a NEFF.

``simulate`` builds the machine state, loads the inputs, interprets the body
in program order (``executor``) while the ``timeline`` accounts time, and
returns a ``SimResult``: a ``model.Model`` executed once (``model.load_neff``
loads a NEFF to execute it many times; ``SimResult`` and the NEFF layout helpers are
``model``'s, re-exported here). birsim executes BIR only: it never reads HLO,
Penguin IR or goldens.
"""
import os

from neuronxcc.starfish.birsim.model import (SimResult, execute_once, gc_paused, io_permutations,  # noqa: F401
                                             to_logical_layout, to_stored_layout)

__all__ = ["SimResult", "simulate", "run_module", "run_neff", "simulate_neff"]


def simulate(module, inputs, target=None, trace=False, poison=True, custom_op_dir=None, custom_op_libs=None,
             sync="auto", strict=False, order="program", ranks=None):
    """Run MODULE on INPUTS (list in module.inputs order, or dict by name).

    sync/strict: see ``timeline`` (semaphore races are recorded, or raised
    with strict=True; "dependencies" orders by memory conflicts instead).
    order: "program" executes the body in program order (the default; needs
    body order to be a valid sequential order, which every layer keeps);
    "streams" runs each engine's stream on its own, interleaved by time, so
    data moves only as the semaphores allow (see ``streams``).
    ranks: the ``collective.RankContext`` of one rank of a multi-rank run
    (``birsim.ranks.simulate_ranks`` passes it); None = one core."""
    if ranks is None and (getattr(module, "attrs", None) or {}).get("lnc") == 2:
        from neuronxcc.starfish.birsim.lnc import simulate_lnc       # both physical cores of the pair
        return simulate_lnc(simulate, module, inputs, target=target, trace=trace, poison=poison, custom_op_dir=custom_op_dir,
                            custom_op_libs=custom_op_libs, sync=sync, strict=strict, order=order)
    return execute_once(module, inputs, trace=trace, target=target, poison=poison, sync=sync, strict=strict,
                        order=order, custom_op_dir=custom_op_dir, custom_op_libs=custom_op_libs, ranks=ranks)


def run_module(module, inputs, target=None, **kw):
    """Outputs (numpy arrays, flattened result order) of MODULE on INPUTS."""
    return simulate(module, inputs, target=target, **kw).outputs


def simulate_neff(neff, inputs, target=None, trace=False, poison=True, **kw):
    """SimResult of the BIR program inside NEFF (a path, or what ``neuronxcc.neff.read_neff``
    returned): ``load_neff`` then one execution. Inputs and outputs are in their logical (HLO)
    layouts: io_transposes recorded in the NEFF are applied."""
    from neuronxcc.starfish.birsim.model import load_neff
    model = load_neff(neff, target=target, poison=poison, prepare=False, **kw)
    try:
        return model.execute(inputs, trace=trace)
    finally:
        model.close()


def run_neff(neff_path, inputs, **kw):
    """Outputs of the NEFF's program (inputs in parameter order)."""
    return simulate_neff(os.fspath(neff_path), inputs, **kw).outputs
