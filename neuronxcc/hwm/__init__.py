"""Hardware model: the one place for per-target NeuronCore numbers.

Numbers are public NeuronCore-v2 (trn1/trn1n/inf2) and NeuronCore-v3
(trn2/trn2n) facts from the hardware reference (shared/reference/
neuroncore-hardware.md, "the reference" below; its source tags such as
[ARCH2] name pages of the public aws-neuron-sdk documentation). Everything
that sizes, costs or verifies a program (birsim's cost model, the
allocators, the verifier, the roofline in the benchmarks) reads them from
here, never from its own constants.

Every field's comment names its source: "ref §N" is the section of the
reference, the bracketed tag the public page it cites, and "C" / "I" whether
the public page states the number (CONFIRMED) or it is derived from stated
numbers (INFERRED, with the derivation). ``SOURCES`` holds the same citations
as data so tests and ``--version`` style reports can show them.
"""
from dataclasses import dataclass, field

from neuronxcc.version import __hwm_version__

__all__ = ["TargetModel", "get_target", "known_targets", "SOURCES", "__hwm_version__"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class TargetModel:
    name: str
    core_version: int                 # NeuronCore generation: 2 (v2) or 3 (v3)
    # -- memories (ref §1) --------------------------------------------------
    num_partitions: int = 128                    # C [ARCH2]
    sbuf_partition_bytes: int = 192 * KiB        # C [ARCH2] 128 x 192 KiB
    sbuf_reserved_bytes: int = 16 * KiB          # C [KLR-T], [ALLOC]: kept back for the compiler/runtime
    psum_partition_bytes: int = 16 * KiB         # C [ARCH2]
    psum_num_banks: int = 8                      # C [ARCH2], [TSZ]
    psum_bank_bytes: int = 2 * KiB               # C [ARCH2]: 512 fp32 per bank
    hbm_bytes_per_core: int = 16 * GiB           # I: 32 GiB per trn1 chip / 2 cores ([TRN1])
    # HBM bandwidth of one core, reads and writes together (the public figure has no per-direction
    # split): I: 820 GB/s per trn1 chip ([ARCH2], [TRN1]) / 2 cores.
    hbm_bytes_per_sec: float = 410e9
    # -- tiling limits (nki.language.tile_size, ref §4) ---------------------
    gemm_stationary_fmax: int = 128              # C [TSZ]
    gemm_moving_fmax: int = 512                  # C [TSZ]
    psum_bank_fmax: int = 512                    # C [TSZ]: fp32 elements per bank per partition
    bn_stats_fmax: int = 512                     # C [TSZ]
    # -- clocks (Hz), ref §2 "Clocks and datapath width" ---------------------
    pe_hz: float = 2.8e9                         # C [ARCH2]
    dve_hz: float = 1.12e9                       # C [ARCH2]
    act_hz: float = 1.4e9                        # C [ARCH2]
    pool_hz: float = 1.4e9                       # C [ARCH2]
    # -- DMA (ref §1 table, §2 "Sequencers, sync engine and fixed overheads") --
    dma_engines: int = 16                        # C [ARCH2], [DMA]: 16 per NC; every queue uses all of them
    dma_queues_per_engine: int = 16              # C [DMA]
    # SBUF/PSUM partitions one DMA engine serves: engine k moves the data of partitions [8k, 8k + 8), so
    # a transfer with an on-chip side runs on the engines of the 8-partition groups it touches. C ref §2
    # "DMA tuning" ([PERF]: a 128x1024 fp32 load is 16 transfers, one per engine, 8 partitions each) and
    # [DMA] ("Performance Considerations", Example 1: "each DMA engine corresponds to 8 partition lanes";
    # a [4, 4096] load runs on one engine, a [128, 128] one on all 16).
    dma_partitions_per_engine: int = 8
    dma_bytes_per_sec_per_engine: float = 17e9   # C [DMABW]: 17 B/ns peak per engine (272 GB/s per NC)
    dma_fixed_latency_s: float = 1.3e-6          # C [DMABW]/[PERF]: ~1300 ns semaphore to start of transfer
    # Per-descriptor (per contiguous chunk) overhead of a DMA engine. I: [DMABW]/[PERF] say >= 4 KiB
    # per partition saturates the DMA and >= 2 KiB is the aim; we read "saturates" as 90% of peak:
    # 4096 B / 17 B/ns / 9 = 26.8 ns. Then 2 KiB chunks run at 82%, 512 B at 53%, 64 B at 12%.
    dma_descriptor_overhead_s: float = 4096 / 17e9 / 9
    # Smallest piece a long contiguous run is split into across the engines. I: [PERF]'s example (a
    # 128x1024 fp32 load is 16 transfers of 32 KiB, one per engine) and the 4 KiB saturation size.
    dma_min_piece_bytes: int = 4 * KiB
    # Round-robin unit of a DMA engine between its queues. C [DMA]: 16 queues per engine, order kept
    # within a queue, queues served round-robin; C [ARCH2]: a DMA touching P partitions needs at least P
    # descriptors (one per partition's contiguous run). So an engine turns to the next queue after a
    # descriptor, one contiguous run. No public figure caps a descriptor's size; I: 32 KiB, the largest
    # per-engine unit the public material shows ([PERF]: "transfers should exceed 32 KiB", a 128x1024
    # fp32 load as 16 transfers of 32 KiB; [DMA]: one engine moving 32 KiB in 1416 ns), so a long
    # HBM->HBM run still yields the engine every ~1.9 us at 17 B/ns. 0: queues not interleaved (each
    # booking takes the engine's first free gap, first come first served).
    dma_queue_chunk_bytes: int = 32 * KiB
    # -- per-instruction costs (engine cycles), ref §3 cost column ([ISA226]) and §2 --
    mm_init_latency: int = 64                    # C [ARCH2], [PERF]: MM II floor (MM_INIT_LATENCY)
    fp32_matmul_slowdown: int = 4                # C [ARCH2], [ISA226]: fp32 is ~4x slower on the PE
    # PE transpose of fp32: C [ARCH3] "transpose mode ... 2x faster for fp32" (v3); on v2 a PE transpose
    # is a matmul against the identity (I), so the fp32 matmul slowdown applies.
    fp32_transpose_slowdown: int = 4
    min_ii: int = 64                             # C [ISA226]: DVE/ACT/POOL II floor (MIN_II)
    access_overhead_cycles: int = 60             # C [ARCH2]: static overhead of starting an SBUF/PSUM access
    pool_startup_cycles: int = 150               # C [ARCH2], [ISA226]: GpSimd formulas start with ~150
    act_accum_readout_cycles: int = 64           # C [ARCH2], [ISA]: ActReadAccumulator ~64 cycles
    # Extra cycles before a dependent instruction sees the result (pipeline latency beyond the II).
    # ACT: C [PERF] dependent 1-element ScalarE instructions have II ~264 cycles; our 1-element II is
    # max(64, 1) + 60 = 124, so 264 - 124 = 140 (I). DVE: C [ARCH2] "add a ~100-cycle static overhead
    # when ... instructions depend on each other". PE/POOL: not public (ref §6 "Gaps"): 0.
    act_dependency_cycles: int = 140
    dve_dependency_cycles: int = 100
    num_gpsimd_cpus: int = 8                     # C [ARCH2]
    # -- port sharing (ref §1 "v2 port conflicts", "v3 relaxes both") ---------
    # v2: VectorE and GpSimd cannot access SBUF at the same time; VectorE and ScalarE cannot access
    # PSUM at the same time (C [ARCH2]). v3: DVE and ACT reach PSUM in parallel (different banks);
    # DVE and GpSimd still share one (arbitrated) SBUF bus (C [ARCH3]).
    dve_pool_share_sbuf_port: bool = True
    dve_act_share_psum_port: bool = True
    # -- strided SBUF/PSUM access (ref §5 "Bandwidth effect") -------------------
    # C [ARCH2] "Performance Consideration / Access pattern": with the most-minor free stride at most
    # 16 bytes an SBUF/PSUM read/write interface supplies its peak; above, half of it, "roughly 50%
    # performance hit on the instructions". v3: I, [ARCH3] lists its changes from v2 and does not
    # change this one.
    sbuf_fast_stride_bytes: int = 16
    strided_access_slowdown: int = 2
    # -- v3 VectorE performance modes (C [ARCH3], ref §2 VectorE): 0 = none (v2) --
    dve_perf_modes: bool = False
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
        """All DMA engines of the core together (the peak of one queue, and of all queues at once)."""
        return self.dma_engines * self.dma_bytes_per_sec_per_engine

    @property
    def memory_bytes_per_sec(self):
        """The core's attainable HBM<->SBUF rate: the DMA engines' peak capped at the HBM bandwidth."""
        return min(self.dma_bytes_per_sec, self.hbm_bytes_per_sec)

    def dma_engine_rate(self, hbm_sides):
        """Bytes/s one DMA engine moves when the transfer reads and/or writes HBM on HBM_SIDES (0-2)
        sides: its peak, capped so that all engines together stay within the HBM bandwidth."""
        r = self.dma_bytes_per_sec_per_engine
        if hbm_sides:
            r = min(r, self.hbm_bytes_per_sec / (self.dma_engines * hbm_sides))
        return r

    def peak_flops(self, dtype_name):
        """PE peak FLOP/s for a matmul input dtype name ('float32', 'bfloat16', ...)."""
        return self.pe_peak_flops.get(dtype_name, self.pe_peak_flops["bfloat16"])


def _pe_peak(pe_hz, fp32_div):
    # C [ARCH2]/[ARCH3]: 128x128 MACs x 2 FLOPs x clock (92 / 79 TFLOPS bf16; fp32 4x slower)
    lowp = 128 * 128 * 2 * pe_hz
    return {"bfloat16": lowp, "float16": lowp, "tfloat32": lowp, "float8_e4m3": lowp,
            "float8_e5m2": lowp, "float8_e4m3fn": lowp, "float32": lowp / fp32_div}


_V2 = dict(core_version=2, pe_peak_flops=_pe_peak(2.8e9, 4))
_V3 = dict(core_version=3,
           sbuf_partition_bytes=224 * KiB, sbuf_reserved_bytes=224 * KiB - 212984,   # C [ARCH3], [KLR-T]
           hbm_bytes_per_core=12 * GiB,               # I: 96 GiB per trn2 chip / 8 cores ([TRN2])
           hbm_bytes_per_sec=2.9e12 / 8,              # I: 2.9 TB/s per trn2 chip ([TRN2]) / 8 cores
           pe_hz=2.4e9, dve_hz=0.96e9, act_hz=1.2e9, pool_hz=1.2e9,          # C [ARCH3]
           dma_bytes_per_sec_per_engine=23e9,         # C [DMABW]: 23 B/ns on v3
           dma_descriptor_overhead_s=4096 / 23e9 / 9,  # I: as v2, at the v3 engine rate
           fp32_transpose_slowdown=2,                 # C [ARCH3]: transpose mode 2x faster for fp32
           dve_act_share_psum_port=False,             # C [ARCH3]
           dve_perf_modes=True,                       # C [ARCH3]
           pe_peak_flops=_pe_peak(2.4e9, 4))

_TARGETS = {
    "trn1": TargetModel("trn1", **_V2),
    "trn1n": TargetModel("trn1n", **_V2),
    "inf2": TargetModel("inf2", **_V2),
    "trn2": TargetModel("trn2", **_V3),
    "trn2n": TargetModel("trn2n", **_V3),
    "trn3": TargetModel("trn3", **_V3),
}

# field -> (reference section, public source tag, C(onfirmed) / I(nferred))
SOURCES = {
    "hbm_bytes_per_sec": ("§1 HBM per chip / per core", "[ARCH2] [TRN1] [TRN2]", "I"),
    "dma_engines": ("§1 DMA engines", "[ARCH2] [DMA]", "C"),
    "dma_partitions_per_engine": ("§1 DMA engines (8 partitions per engine)", "[DMA]", "C"),
    "dma_bytes_per_sec_per_engine": ("§1 DMA bandwidth per engine", "[DMABW]", "C"),
    "dma_fixed_latency_s": ("§2 Sequencers, sync engine and fixed overheads", "[DMABW] [PERF]", "C"),
    "dma_descriptor_overhead_s": ("§2 DMA tuning (>= 2 KiB aim, >= 4 KiB saturates)", "[DMABW] [PERF]", "I"),
    "dma_min_piece_bytes": ("§2 DMA tuning (128x1024 fp32 = 16 x 32 KiB)", "[PERF]", "I"),
    "dma_queue_chunk_bytes": ("§1 DMA queues (round-robin), address map (descriptor per partition run); "
                              "§2 DMA tuning (32 KiB)", "[DMA] [ARCH2] [PERF]", "I (the cap; the rule is C)"),
    "pe_hz": ("§2 Clocks", "[ARCH2] [ARCH3]", "C"),
    "dve_hz": ("§2 Clocks", "[ARCH2] [ARCH3]", "C"),
    "act_hz": ("§2 Clocks", "[ARCH2] [ARCH3]", "C"),
    "pool_hz": ("§2 Clocks", "[ARCH2] [ARCH3]", "C"),
    "mm_init_latency": ("§2 TensorE cost model", "[ARCH2] [PERF] [ISA226]", "C"),
    "fp32_matmul_slowdown": ("§2 TensorE cost model", "[ARCH2] [ISA226]", "C"),
    "fp32_transpose_slowdown": ("§2 TensorE v3 transpose mode", "[ARCH3]", "C on v3, I on v2"),
    "min_ii": ("§3 cost column (MIN_II)", "[ISA226]", "C"),
    "access_overhead_cycles": ("§2 Sequencers ... fixed overheads", "[ARCH2]", "C"),
    "pool_startup_cycles": ("§2 GpSimd", "[ARCH2] [ISA226]", "C"),
    "act_accum_readout_cycles": ("§2 ScalarE", "[ARCH2] [ISA]", "C"),
    "act_dependency_cycles": ("§2 ScalarE (dependent II ~264 cycles)", "[PERF]", "I"),
    "dve_dependency_cycles": ("§2 VectorE (~100-cycle static overhead)", "[ARCH2]", "C"),
    "dve_pool_share_sbuf_port": ("§1 v2 port conflicts / v3 relaxes both", "[ARCH2] [ARCH3]", "C"),
    "dve_act_share_psum_port": ("§1 v2 port conflicts / v3 relaxes both", "[ARCH2] [ARCH3]", "C"),
    "dve_perf_modes": ("§2 VectorE v3 performance mode", "[ARCH3]", "C"),
    "sbuf_fast_stride_bytes": ("§5 Access pattern, bandwidth effect", "[ARCH2]", "C on v2, I on v3"),
    "strided_access_slowdown": ("§5 Access pattern, bandwidth effect", "[ARCH2]", "C on v2, I on v3"),
    "pe_peak_flops": ("§2 TensorE peak TFLOPS", "[ARCH2] [ARCH3] [HWv3]", "C"),
}


def known_targets():
    return sorted(_TARGETS)


def get_target(name):
    """The model for ``--target`` NAME (case-insensitive). Raises KeyError."""
    return _TARGETS[str(name).lower()]
