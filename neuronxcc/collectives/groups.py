"""Which devices take part in a collective, as XLA defines it.

A program runs on ``num_replicas x num_partitions`` devices. Device ``d``
(its global id, the order the runtime hands out ranks) is replica
``d // num_partitions``, partition ``d % num_partitions``.

XLA's group modes (``CollectiveOpGroupMode``), chosen from whether the op has
a ``channel_id`` and its ``use_global_device_ids``:

  no channel_id                          cross-replica: replica_groups list
                                         replica ids; one group per partition
  channel_id, no use_global_device_ids   cross-partition: groups list
      attribute (all-to-all, permute)    partition ids; one group per replica
  channel_id, use_global_device_ids=false cross-replica-and-partition: groups
                                         list replica ids; a group holds those
                                         replicas in every partition
  channel_id, use_global_device_ids=true flattened ids: groups list global
                                         device ids

Empty ``replica_groups`` mean one group of every replica (every partition in
cross-partition mode). The order of a group is the order data is laid out in
(all-gather concatenation, reduce-scatter and all-to-all blocks): the order
listed, and in cross-replica-and-partition mode replica-major (for each listed
replica, every partition), as XLA's GetParticipatingDevices builds it.

Invariants: every returned group is a tuple of distinct global device ids in
``range(space.size)``; groups of one call never share a device. Bad groups
raise ``CollectiveError`` (NCC_ECCL002) naming what is wrong.
"""
from neuronxcc.errors import CollectiveError

__all__ = ["RankSpace", "group_mode", "participant_groups", "permute_pairs", "CROSS_REPLICA",
           "CROSS_PARTITION", "CROSS_REPLICA_AND_PARTITION", "FLATTENED_ID", "rank_count_from_groups"]

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_ID = "flattened_id"

# ops whose HLO carries use_global_device_ids (XLA passes std::nullopt for the others)
_HAS_GLOBAL_IDS_ATTR = ("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter")


class RankSpace:
    """num_replicas x num_partitions devices; global id = replica * num_partitions + partition."""

    __slots__ = ("num_replicas", "num_partitions")

    def __init__(self, num_replicas=1, num_partitions=1):
        self.num_replicas = max(1, int(num_replicas or 1))
        self.num_partitions = max(1, int(num_partitions or 1))

    @property
    def size(self):
        return self.num_replicas * self.num_partitions

    def replica_of(self, d):
        return d // self.num_partitions

    def partition_of(self, d):
        return d % self.num_partitions

    def device(self, replica, partition):
        return replica * self.num_partitions + partition

    def __repr__(self):
        return "RankSpace(%d replicas x %d partitions)" % (self.num_replicas, self.num_partitions)

    def __eq__(self, o):
        return isinstance(o, RankSpace) and (o.num_replicas, o.num_partitions) == (self.num_replicas,
                                                                                   self.num_partitions)

    def __hash__(self):
        return hash((self.num_replicas, self.num_partitions))


def group_mode(opcode, channel_id, use_global_device_ids, where=""):
    """XLA's group mode of a collective (see the module docstring)."""
    has_channel = channel_id is not None and channel_id is not False
    if opcode.startswith("collective-permute"):
        return CROSS_PARTITION if has_channel else CROSS_REPLICA
    if not has_channel:
        if use_global_device_ids:
            raise CollectiveError("%s%s: use_global_device_ids=true needs a channel_id"
                                  % (opcode, " (%s)" % where if where else ""), code="NCC_ECCL002")
        return CROSS_REPLICA
    if opcode not in _HAS_GLOBAL_IDS_ATTR:
        return CROSS_PARTITION
    return FLATTENED_ID if use_global_device_ids else CROSS_REPLICA_AND_PARTITION


def _check_ids(groups, limit, what, where):
    seen = set()
    for g in groups:
        for x in g:
            if not 0 <= x < limit:
                raise CollectiveError("%s: %s %d is out of range [0, %d)" % (where, what, x, limit),
                                      code="NCC_ECCL002")
            if x in seen:
                raise CollectiveError("%s: %s %d appears in more than one place of replica_groups"
                                      % (where, what, x), code="NCC_ECCL002")
            seen.add(x)


def participant_groups(mode, replica_groups, space, where="collective"):
    """Tuple of groups (tuples of global device ids, in data order) for one collective."""
    R, P = space.num_replicas, space.num_partitions
    rg = [tuple(int(x) for x in g) for g in (replica_groups or ())]
    if mode == FLATTENED_ID:
        if not rg:
            raise CollectiveError("%s: use_global_device_ids=true needs explicit replica_groups" % where,
                                  code="NCC_ECCL002")
        _check_ids(rg, space.size, "device id", where)
        out = rg
    elif mode == CROSS_REPLICA:
        rg = rg or [tuple(range(R))]
        _check_ids(rg, R, "replica id", where)
        out = [tuple(space.device(r, p) for r in g) for p in range(P) for g in rg]
    elif mode == CROSS_PARTITION:
        rg = rg or [tuple(range(P))]
        _check_ids(rg, P, "partition id", where)
        out = [tuple(space.device(r, p) for p in g) for r in range(R) for g in rg]
    elif mode == CROSS_REPLICA_AND_PARTITION:
        rg = rg or [tuple(range(R))]
        _check_ids(rg, R, "replica id", where)
        out = [tuple(space.device(r, p) for r in g for p in range(P)) for g in rg]
    else:
        raise ValueError("unknown group mode %r" % (mode,))
    sizes = {len(g) for g in out}
    if len(sizes) > 1:
        raise CollectiveError("%s: replica groups have different sizes %s" % (where, sorted(sizes)),
                              code="NCC_ECCL002")
    return tuple(out)


def group_of(groups, device):
    """(group, position of DEVICE in it), or (None, -1) when DEVICE takes no part."""
    for g in groups:
        for k, d in enumerate(g):
            if d == device:
                return g, k
    return None, -1


def permute_pairs(mode, pairs, space, where="collective-permute"):
    """source_target_pairs as global (source device, target device) pairs: in cross-replica
    mode one copy of each pair per partition, in cross-partition mode one per replica."""
    R, P = space.num_replicas, space.num_partitions
    out = []
    if mode == CROSS_REPLICA:
        lim, reps = R, [(lambda x, p=p: space.device(x, p)) for p in range(P)]
    else:
        lim, reps = P, [(lambda x, r=r: space.device(r, x)) for r in range(R)]
    srcs, dsts = set(), set()
    for s, t in pairs:
        s, t = int(s), int(t)
        if not (0 <= s < lim and 0 <= t < lim):
            raise CollectiveError("%s: pair {%d,%d} is out of range [0, %d)" % (where, s, t, lim),
                                  code="NCC_ECCL002")
        if s in srcs or t in dsts:
            raise CollectiveError("%s: a source or target appears twice in source_target_pairs ({%d,%d})"
                                  % (where, s, t), code="NCC_ECCL002")
        srcs.add(s)
        dsts.add(t)
    for f in reps:
        for s, t in pairs:
            out.append((f(int(s)), f(int(t))))
    return tuple(out)


def rank_count_from_groups(opcode, attrs):
    """The smallest device count a collective's groups imply (1 when they imply nothing):
    the largest id named + 1. Used when neither the proto nor the text header gives one."""
    n = 0
    for g in attrs.get("replica_groups") or ():
        for x in g:
            n = max(n, int(x) + 1)
    for s, t in attrs.get("source_target_pairs") or ():
        n = max(n, int(s) + 1, int(t) + 1)
    return max(n, 1)
