"""Hardware model: the one place for per-target NeuronCore numbers.

Numbers are public NeuronCore-v2 (trn1/trn1n/inf2) and NeuronCore-v3
(trn2/trn2n) facts from the hardware reference (shared/reference/
neuroncore-hardware.md). Everything that sizes, costs or verifies a program
(birsim's cost model, the allocators, the verifier, the roofline in the
benchmarks) reads them from here, never from its own constants.
"""
from dataclasses import dataclass, field

from neuronxcc.version import __hwm_version__

__all__ = ["TargetModel", "get_target", "known_targets", "__hwm_version__"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class TargetModel:
    name: str
    core_version: int                 # NeuronCore generation: 2 (v2) or 3 (v3)
    # -- memories ---------------------------------------------------------
    num_partitions: int = 128
    sbuf_partition_bytes: int = 192 * KiB
    sbuf_reserved_bytes: int = 16 * KiB          # kept back for the compiler/runtime
    psum_partition_bytes: int = 16 * KiB
    psum_num_banks: int = 8
    psum_bank_bytes: int = 2 * KiB
    hbm_bytes_per_core: int = 16 * GiB
    hbm_bytes_per_sec: float = 410e9             # per core
    # -- tiling limits (nki.language.tile_size) ---------------------------
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    psum_bank_fmax: int = 512                    # fp32 elements per bank per partition
    bn_stats_fmax: int = 512
    # -- clocks (Hz) ------------------------------------------------------
    pe_hz: float = 2.8e9
    dve_hz: float = 1.12e9
    act_hz: float = 1.4e9
    pool_hz: float = 1.4e9
    # -- DMA ---------------------------------------------------------------
    dma_engines: int = 16
    dma_queues_per_engine: int = 16
    dma_bytes_per_sec_per_engine: float = 17e9   # [DMABW] 17 B/ns on v2
    dma_fixed_latency_s: float = 1.3e-6          # semaphore to start of transfer
    # -- per-instruction costs (engine cycles) ----------------------------
    mm_init_latency: int = 64                    # MM II floor
    fp32_matmul_slowdown: int = 4
    min_ii: int = 64                             # DVE/ACT/POOL II floor
    access_overhead_cycles: int = 60             # static overhead of an SBUF/PSUM access
    pool_startup_cycles: int = 150
    act_accum_readout_cycles: int = 64
    num_gpsimd_cpus: int = 8
    # -- peak throughput (FLOP/s per core) --------------------------------
    pe_peak_flops: dict = field(default_factory=dict)

    @property
    def sbuf_usable_bytes(self):
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    @property
    def sbuf_bytes(self):
        return self.num_partitions * self.sbuf_partition_bytes

    @property
    def psum_bytes(self):
        return self.num_partitions * self.psum_partition_bytes

    @property
    def dma_bytes_per_sec(self):
        return self.dma_engines * self.dma_bytes_per_sec_per_engine

    def peak_flops(self, dtype_name):
        """PE peak FLOP/s for a matmul input dtype name ('float32', 'bfloat16', ...)."""
        return self.pe_peak_flops.get(dtype_name, self.pe_peak_flops["bfloat16"])


def _pe_peak(pe_hz, fp32_div):
    lowp = 128 * 128 * 2 * pe_hz
    return {"bfloat16": lowp, "float16": lowp, "tf32": lowp, "float8_e4m3": lowp,
            "float8_e5m2": lowp, "float8_e4m3fn": lowp, "float32": lowp / fp32_div}


_V2 = dict(core_version=2, pe_peak_flops=_pe_peak(2.8e9, 4))
_V3 = dict(core_version=3, sbuf_partition_bytes=224 * KiB, sbuf_reserved_bytes=224 * KiB - 212984,
           hbm_bytes_per_core=12 * GiB, hbm_bytes_per_sec=725e9,
           pe_hz=2.4e9, dve_hz=0.96e9, act_hz=1.2e9, pool_hz=1.2e9,
           dma_bytes_per_sec_per_engine=23e9, pe_peak_flops=_pe_peak(2.4e9, 4))

_TARGETS = {
    "trn1": TargetModel("trn1", **_V2),
    "trn1n": TargetModel("trn1n", **_V2),
    "inf2": TargetModel("inf2", **_V2),
    "trn2": TargetModel("trn2", **_V3),
    "trn2n": TargetModel("trn2n", **_V3),
    "trn3": TargetModel("trn3", **_V3),
}


def known_targets():
    return sorted(_TARGETS)


def get_target(name):
    """The model for ``--target`` NAME (case-insensitive). Raises KeyError."""
    return _TARGETS[str(name).lower()]
