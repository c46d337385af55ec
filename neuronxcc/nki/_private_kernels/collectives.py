"""``CollectivesConfig``: the replica-group bookkeeping NxD's parallel_state builds at model-parallel initialisation
(``CollectivesConfig(replica_groups=groups).rank_src_tgt_pairs[rank]``, the ring that rank's context-parallel
group forms, handed to the ring-attention kernels as ``src_tgt_pairs``). Our own implementation of that contract:

* ``replica_groups``: a list of rank lists (each a group; groups are disjoint);
* ``ranks`` (sorted), ``num_groups``, ``group_size``;
* ``rank_group[r]``: r's group; ``rank_position[r]``: r's index in it;
* ``rank_src_tgt_pairs[r]``: the ring of r's group as (source, target) pairs, each rank sending to the next
  one of its group in the listed order (the last to the first): ``[(g[0], g[1]), ..., (g[-1], g[0])]``;
  a group of one rank is the single pair (r, r);
* ``ring_size(pairs)``: the number of ranks a list of such pairs connects.
"""
import dataclasses

__all__ = ["CollectivesConfig", "ring_size"]


def _groups(replica_groups):
    groups = tuple(tuple(int(r) for r in g) for g in (replica_groups or ()))
    seen = set()
    for g in groups:
        if not g:
            raise ValueError("CollectivesConfig: an empty replica group in %r" % (replica_groups,))
        for r in g:
            if r in seen:
                raise ValueError("CollectivesConfig: rank %d is in more than one replica group (or twice in one) "
                                 "of %r" % (r, replica_groups))
            seen.add(r)
    return groups


def ring_size(pairs):
    """How many ranks the (source, target) pairs connect (0 for none)."""
    ranks = set()
    for p in pairs or ():
        src, tgt = p
        ranks.add(int(src))
        ranks.add(int(tgt))
    return len(ranks)


@dataclasses.dataclass(frozen=True)
class CollectivesConfig:
    replica_groups: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "replica_groups", _groups(self.replica_groups))

    @property
    def ranks(self):
        return sorted(r for g in self.replica_groups for r in g)

    @property
    def num_groups(self):
        return len(self.replica_groups)

    @property
    def group_size(self):
        sizes = {len(g) for g in self.replica_groups}
        if len(sizes) > 1:
            raise ValueError("CollectivesConfig: replica groups of different sizes %s" % sorted(sizes))
        return sizes.pop() if sizes else 0

    @property
    def rank_group(self):
        return {r: list(g) for g in self.replica_groups for r in g}

    @property
    def rank_position(self):
        return {r: i for g in self.replica_groups for i, r in enumerate(g)}

    @property
    def rank_src_tgt_pairs(self):
        out = {}
        for g in self.replica_groups:
            ring = [(g[i], g[(i + 1) % len(g)]) for i in range(len(g))]
            for r in g:
                out[r] = list(ring)
        return out
