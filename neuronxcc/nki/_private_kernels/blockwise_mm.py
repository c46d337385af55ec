"""Configuration names of the blockwise (MoE) matmul kernels that NxD's MoE modules import at module load.
``BlockShardStrategy`` is the real selector (how expert blocks are split between the two cores of an LNC=2
core: ``HI_LO`` halves, ``PING_PONG`` alternating blocks); the kernels themselves are not implemented yet."""
import enum


class BlockShardStrategy(enum.Enum):
    HI_LO = 0
    PING_PONG = 1
