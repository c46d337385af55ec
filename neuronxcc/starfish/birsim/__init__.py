"""birsim: the BIR simulator, the executable definition of BIR semantics.

It executes BIR instructions (never HLO, Penguin IR or goldens) against a
machine-state model of one NeuronCore: SBUF (128 x 192 KiB on trn1/inf2,
128 x 224 KiB on trn2), PSUM (128 x 16 KiB, 8 banks of 2 KiB) and HBM
buffers. Unallocated memlocs get private storage; allocated ones share the
SBUF/PSUM arrays, so allocation bugs give wrong results.

Numerics: fp32 internal math; round-to-nearest-even casts on output (bf16,
fp16, fp8 through the Cython kernels, matching ml_dtypes); float -> int
truncates toward zero and saturates; exact int64 math on POOL when every
operand is an integer type, and for bitvec ops; DVE arithmetic on integers
goes through fp32 (as the hardware does). See ``executor`` for the rules and
``alu`` for the op definitions.

Timing: per-engine in-order issue, semaphore waits, per-queue DMA, costs from
``birpy.cost`` (``neuronxcc.hwm`` numbers); see ``timeline``. Execution order:
program order by default; ``order="streams"`` runs every engine's stream on its
own, interleaved by completion time (``streams``), so a missing semaphore wait
reads stale data as on the device.

Speed: each instruction is prepared once into a cached plan (``plans``: the
operands' resolved access patterns, decided numeric domain, immediate
scalars; typed Cython plans in ``_plans`` for byte copies, fp32 and integer
element-wise ops, selects), so an execution only resolves base addresses
(affine offsets: coefficient arrays, ``_apinfo``) and does the element work;
the timeline's per-step accounting is typed (``_timecore``). Machine-state
buffers of finished runs are reused (``state``). ``Executor(plans=False)`` runs
every instruction through its ``op_*`` handler: the reference the plans are
tested against (tests/birsim/test_plans.py).

API::

    from neuronxcc.starfish.birsim import run_neff, run_module, simulate
    outs = run_neff("file.neff", [x, y])          # outputs, flattened result order
    model = load_neff("file.neff"); res = model.execute([x, y])   # load once, execute many times
    outs = run_module(module, [x, y], target="trn1")
    res = simulate(module, [x, y], trace=True)    # .outputs .total_s .busy_s .utilisation
    res.write_trace("trace.json")                 # Chrome trace-event JSON (Perfetto)
    res.memloc("t0", "bfloat16"); res.tensor("x") # final memory contents (debugging)

Load once, execute many times (as the runtime's nrt_load / nrt_execute): ``load_neff(path)``
returns a model whose ``execute(inputs)`` gives a SimResult; parsing and every instruction's
preparation happen at load (``model``). ``simulate`` / ``simulate_neff`` are one execution.

Many cores: ``simulate_ranks(module, inputs_per_rank)`` / ``simulate_neff_ranks`` run
N NeuronCores meeting at ``collective`` instructions (``ranks``, ``collective``).

Tool: ``birsim NEFF --inputs IN.npz --output OUT.npz [--trace trace.json] [--ranks N]``
(``neuronxcc.starfish.birsim.tool``).
"""
from neuronxcc.starfish.birsim.ranks import MultiRankResult, simulate_neff_ranks, simulate_ranks
from neuronxcc.starfish.birsim.model import Model, load_neff
from neuronxcc.starfish.birsim.sim import SimResult, run_module, run_neff, simulate, simulate_neff

__all__ = ["SimResult", "run_module", "run_neff", "simulate", "simulate_neff", "simulate_ranks",
           "simulate_neff_ranks", "MultiRankResult", "Model", "load_neff"]
