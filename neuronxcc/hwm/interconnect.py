"""Interconnect model: how long a collective takes between NeuronCores.

Public facts (sources; "I" marks our own inference where no number is public):

  trn1 / trn1n (NeuronCore-v2)
    * 2 NeuronCores per Trainium chip, 16 chips per trn1.32xlarge     [TRN1] trainium.rst
    * 4 NeuronLink-v2 links per Trainium chip, 6 CC-Cores (collective
      engines) per chip                                               [NKI-ARCH2] trainium_inferentia2_arch
    * chips of a trn1.32xlarge joined in a 4D hypercube by NeuronLink-v2 [TRN1-ARCH] trn1-arch.rst
    * 32 DMA engines per chip, 1 TB/s of DMA bandwidth per chip         [TRN1], [NKI-ARCH2]
    * per-link bandwidth: no figure in the Neuron docs; AWS's instance page quotes 768 GB/s of
      NeuronLink bandwidth per chip, i.e. 192 GB/s per link over 4 links (I, unverified here)
  trn2 (NeuronCore-v3)
    * 8 NeuronCores per Trainium2 chip, 16 chips per trn2.48xlarge in a 4 x 4 torus of
      NeuronLink-v3; LNC=2 pairs cores, 64 ranks per instance        [TRN2], training best-practices
    * 4 NeuronLink-v3 links and 20 CC-Cores per chip, 128 DMA engines  [NKI-ARCH3] trainium2_arch
    * per-link bandwidth: AWS quotes 1.28 TB/s of NeuronLink-v3 per chip, 320 GB/s per link
      (I, unverified here)
  both
    * LNC=2 barrier between the two cores of a logical core (trn2 ``remote_semaphores`` increment
      the other core's semaphores [HW ref. sec. 5]): one semaphore round trip, 0.5 us (I)
    * fixed latency per algorithm step: not public; 2 us per step (a semaphore round trip plus
      one DMA descriptor chain, ~the DMA fixed latency of the core model) (I)

Algorithms (the usual ring / tree costs, alpha = step latency, B = bottleneck bandwidth):
  all-reduce      ring 2(G-1) alpha + 2 (G-1)/G S / B; tree 2 ceil(log2 G) (alpha + S / B);
                  the cheaper one is used (tree wins for small messages)
  all-gather      ring (G-1) alpha + (G-1)/G S_out / B
  reduce-scatter  ring (G-1) alpha + (G-1)/G S_in / B
  all-to-all      pairwise (G-1) alpha + (G-1)/G S / B
  permute         alpha + S / B
S is the bytes of the per-rank operand. B is the NeuronLink per-link bandwidth when the
group spans more than one chip (ranks are numbered chip-major), else the chip's on-die DMA
bandwidth shared by its cores. A group of one costs nothing.
"""
import math
from dataclasses import dataclass

__all__ = ["Interconnect", "get_interconnect", "collective_time"]

GB = 1e9


@dataclass(frozen=True)
class Interconnect:
    name: str
    cores_per_chip: int          # physical NeuronCores per chip
    chips_per_node: int          # chips of the largest instance
    links_per_chip: int
    link_bytes_per_sec: float    # one NeuronLink, one direction (I: see module doc)
    chip_dma_bytes_per_sec: float  # on-chip DMA between cores of one chip
    step_latency_s: float        # fixed latency of one algorithm step (I)
    topology: str
    cc_cores_per_chip: int
    core_barrier_s: float = 0.5e-6   # LNC=2 pair barrier: a remote-semaphore round trip (I: not public)


_TRN1 = Interconnect("trn1", 2, 16, 4, 768 * GB / 4, 1000 * GB, 2e-6, "4D hypercube (NeuronLink-v2)", 6)
_TRN2 = Interconnect("trn2", 8, 16, 4, 1280 * GB / 4, 2900 * GB, 2e-6, "4x4 2D torus (NeuronLink-v3)", 20)
_MODELS = {"trn1": _TRN1, "trn1n": _TRN1, "inf2": _TRN1, "trn2": _TRN2, "trn2n": _TRN2, "trn3": _TRN2}


def get_interconnect(target):
    name = getattr(target, "name", target) or "trn1"
    return _MODELS.get(name, _TRN1)


def _bandwidth(ic, group):
    chips = {d // ic.cores_per_chip for d in group}
    if len(chips) <= 1:
        return ic.chip_dma_bytes_per_sec / max(1, len(group))
    return ic.link_bytes_per_sec


def collective_time(op, nbytes, group, target="trn1"):
    """Seconds one collective takes once every member has arrived (module doc).

    op: all_reduce | all_gather | reduce_scatter | all_to_all | permute; nbytes: the bytes of
    this rank's operand (all_gather: of its result); group: the members' global ids."""
    g = len(group)
    if op == "fence":
        return 0.0
    if op == "barrier" and g > 1:
        return get_interconnect(target).core_barrier_s
    if g <= 1 or nbytes <= 0:
        return 0.0 if g <= 1 else get_interconnect(target).step_latency_s
    ic = get_interconnect(target)
    a, b, s = ic.step_latency_s, _bandwidth(ic, group), float(nbytes)
    f = (g - 1) / g
    if op == "all_reduce":
        ring = 2 * (g - 1) * a + 2 * f * s / b
        tree = 2 * math.ceil(math.log2(g)) * (a + s / b)
        return min(ring, tree)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (g - 1) * a + f * s / b
    if op == "permute":
        return a + s / b
    if op == "barrier":             # LNC=2: the two cores of one logical core meet (no data)
        return a
    raise ValueError("unknown collective %r" % (op,))
