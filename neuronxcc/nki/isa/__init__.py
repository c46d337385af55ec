"""``neuronxcc.nki.isa`` (nisa): NeuronCore instructions, each traced to (nearly) one BIR instruction.

Engines: ``nc_matmul`` / PE ``nc_transpose`` on TensorE (SBUF in, PSUM fp32 out), ``activation`` on
ScalarE (``func(data * scale + bias)``, optional add-reduce into ``reduce_res``), ALU instructions on
VectorE unless ``engine=`` says otherwise, ``iota`` / ``affine_select`` on GpSimd, ``dma_copy`` on a
DMA queue. Output dtype defaults to the (first) input tile's dtype. Instructions not built yet
raise ``NkiNotImplementedError`` naming the instruction.

The instructions live in one module per engine family (``_tensor_engine``, ``_scalar_engine``,
``_vector_engine``, ``_select``, ``_gpsimd``, ``_dma``, ``_custom``); ``nc_transpose`` and the enums are
the tracer's (``nki._trace.movement`` / ``engines``). Every public name is re-exported here, so
``neuronxcc.nki.isa.<name>`` is the one spelling.
"""
from neuronxcc.nki._trace.engines import dge_mode, engine, nc_version, oob_mode, reduce_cmd  # noqa: F401
from neuronxcc.nki._trace.movement import nc_transpose  # noqa: F401
from neuronxcc.nki.isa._custom import builtin_custom_op  # noqa: F401
from neuronxcc.nki.isa._dma import dma_copy, dma_transpose, tensor_copy_dynamic_dst  # noqa: F401
from neuronxcc.nki.isa._dma import tensor_copy_dynamic_src  # noqa: F401
from neuronxcc.nki.isa._gpsimd import affine_select, iota, local_gather, sequence_bounds  # noqa: F401
from neuronxcc.nki.isa._gpsimd import tensor_partition_reduce  # noqa: F401
from neuronxcc.nki.isa._scalar_engine import activation, activation_reduce  # noqa: F401
from neuronxcc.nki.isa._common import fp32  # noqa: F401
from neuronxcc.nki.isa._select import bn_aggr, bn_stats, max8, nc_find_index8, nc_match_replace8  # noqa: F401
from neuronxcc.nki.isa._select import nc_stream_shuffle, range_select, select_reduce  # noqa: F401
from neuronxcc.nki.isa._select import tensor_copy_predicated  # noqa: F401
from neuronxcc.nki.isa._tensor_engine import nc_matmul  # noqa: F401
from neuronxcc.nki.isa._vector_engine import dropout, memset, reciprocal, scalar_tensor_tensor  # noqa: F401
from neuronxcc.nki.isa._vector_engine import tensor_copy, tensor_reduce, tensor_scalar  # noqa: F401
from neuronxcc.nki.isa._vector_engine import tensor_scalar_reduce, tensor_tensor, tensor_tensor_scan  # noqa: F401

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
dma_engine = engine.sync
unknown_engine = engine.unknown


def get_nc_version():
    from neuronxcc.nki._trace.context import current_or_none
    ctx = current_or_none()
    target = ctx.target if ctx is not None else "trn1"
    return nc_version.gen3 if target in ("trn2", "trn3") else nc_version.gen2
