"""How many ranks an HLO program runs on, and running all of them.

The rank count of a per-rank (SPMD) program: ``replica_count`` x
``num_partitions`` from the text header or the proto's device_assignment
when the input states them; else it follows from the collectives'
replica_groups / source_target_pairs (the largest id + 1; as partitions when
the collectives carry channel_ids, the jax/SPMD form, else as replicas); else
one. An explicit ``ranks=N`` (``xla_infergoldens --ranks``) overrides an
unstated count and must agree with a stated one.

``neuronxcc.hlo.interpreter.evaluate_ranks`` runs the reference interpreter
once per rank over this rank space (this module does not import the
interpreter: its collective handlers ask it for the space).
"""
from neuronxcc.collectives import RankSpace
from neuronxcc.collectives.groups import rank_count_from_groups
from neuronxcc.errors import CollectiveError

__all__ = ["rank_space", "collective_instructions", "COLLECTIVE_OPCODES", "set_rank_count"]

COLLECTIVE_OPCODES = frozenset(("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
                                "all-to-all", "collective-permute", "collective-permute-start"))


def collective_instructions(module):
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode in COLLECTIVE_OPCODES:
                yield i


def rank_space(module, ranks=None):
    """The module's RankSpace (see the module docstring)."""
    R, P = getattr(module, "replica_count", None), getattr(module, "num_partitions", None)
    if R or P:
        sp = RankSpace(R or 1, P or 1)
        if ranks is not None and int(ranks) != sp.size:
            raise CollectiveError("--ranks %d disagrees with the module's replica_count=%d x num_partitions=%d"
                                  % (int(ranks), sp.num_replicas, sp.num_partitions), code="NCC_ECCL002")
        return sp
    n, channel = 1, False
    for i in collective_instructions(module):
        n = max(n, rank_count_from_groups(i.opcode, i.attrs))
        channel = channel or i.attrs.get("channel_id") is not None
    if ranks is not None:
        if int(ranks) < n:
            raise CollectiveError("--ranks %d is fewer than the %d ranks the replica groups name" % (int(ranks), n),
                                  code="NCC_ECCL002")
        n = int(ranks)
    return RankSpace(1, n) if channel else RankSpace(n, 1)


def set_rank_count(module, n):
    """Record N ranks in MODULE (its replica_count / num_partitions, so the proto's
    device_assignment and every later job carry them): as rank_space(module, ranks=N) decides;
    a module that states another count is CollectiveError NCC_ECCL002."""
    sp = rank_space(module, ranks=int(n))
    module.replica_count, module.num_partitions = sp.num_replicas, sp.num_partitions
    return sp
