"""Collective semantics shared by every layer that runs more than one rank.

``groups``: XLA's collective group modes (which devices take part in one
collective, in which order), resolved once from an HLO instruction's
``replica_groups`` / ``source_target_pairs`` / ``channel_id`` /
``use_global_device_ids`` and the module's replica and partition counts.
``rendezvous``: the meeting point N rank threads use to exchange the operands
of a collective, with a clear error instead of a hang when ranks disagree.

The HLO reference interpreter and birsim both use these; neither imports the
other. Nothing here knows HLO instructions or BIR: callers pass plain ints.
"""
from neuronxcc.collectives.groups import (CROSS_PARTITION, CROSS_REPLICA, CROSS_REPLICA_AND_PARTITION,
                                          FLATTENED_ID, RankSpace, group_mode, participant_groups,
                                          permute_pairs)
from neuronxcc.collectives.rendezvous import Rendezvous, run_ranks

__all__ = ["RankSpace", "group_mode", "participant_groups", "permute_pairs", "CROSS_REPLICA",
           "CROSS_PARTITION", "CROSS_REPLICA_AND_PARTITION", "FLATTENED_ID", "Rendezvous", "run_ranks"]
