"""``get_program_sharding_info()``, called inside kernels (NxD-Inference's KV-cache kernels:
``_, n_prgs, prg_id = get_program_sharding_info()``): ``(grid rank, instances on axis 0, this instance's id on
axis 0)``, i.e. ``(nl.program_ndim(), nl.num_programs(0), nl.program_id(0))``, and ``(0, 1, 0)`` for a kernel
launched without a grid. The id is a program-id expression: compare it in ``if`` statements or use it in
indices, as with ``nl.program_id``."""
import neuronxcc.nki.language as nl

__all__ = ["get_program_sharding_info"]


def get_program_sharding_info():
    ndim = nl.program_ndim()
    if not ndim:
        return 0, 1, 0
    return ndim, nl.num_programs(0), nl.program_id(0)
