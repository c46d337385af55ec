"""The meeting point of N rank threads exchanging collective operands.

``run_ranks(n, fn)`` runs ``fn(rank, rendezvous)`` for every rank in its own
thread and returns their results in rank order. Inside, a rank calls
``rv.exchange(rank, group, signature, value, what)`` at each collective: it
blocks until every member of ``group`` has reached the same collective (the
k-th one this rank makes in that group), then gets the members' values in
group order.

Never a hang: a rank that waits while no rank can still arrive (every other
rank has finished, failed or waits elsewhere) is a deadlock, reported as
``CollectiveError`` [NCC_ECCL001] naming where each rank stands; members
that arrive with different signatures (opcode, shape, dtype, groups) are
reported the same way. The first error of any rank stops all of them and is
the one raised.
"""
import threading

from neuronxcc.errors import CollectiveError

__all__ = ["Rendezvous", "run_ranks"]

_RUN, _WAIT, _DONE, _FAILED = "running", "waiting", "finished", "failed"


class _Abort(Exception):
    """Raised in a rank thread when another rank already failed (not reported)."""


class Rendezvous:
    def __init__(self, nranks):
        self.n = int(nranks)
        self.cv = threading.Condition()
        self.state = [_RUN] * self.n
        self.at = [None] * self.n          # what each waiting rank waits in
        self.waitkey = [None] * self.n     # the slot each waiting rank waits in
        self.counts = [dict() for _ in range(self.n)]  # rank -> {group: collectives made in it}
        self.slots = {}                    # (group, k) -> {"vals": {rank: (sig, value)}, "read": set()}
        self.error = None

    # -- called by rank threads ------------------------------------------------
    def exchange(self, rank, group, signature, value, what="collective"):
        group = tuple(group)
        with self.cv:
            self._check_abort()
            k = self.counts[rank].get(group, 0)
            self.counts[rank][group] = k + 1
            key = (group, k)
            slot = self.slots.setdefault(key, {"vals": {}, "read": set()})
            slot["vals"][rank] = (signature, value, what)
            self.state[rank] = _WAIT
            self.waitkey[rank] = key
            self.at[rank] = "%s (its collective #%d over ranks %s)" % (what, k, _ids(group))
            self.cv.notify_all()
            while True:
                self._check_abort()
                vals = slot["vals"]
                if all(m in vals for m in group):
                    break
                if not self._anyone_can_arrive(group, vals):
                    self._fail(CollectiveError(self._deadlock_message(rank, group, vals, what), code="NCC_ECCL001"))
                    self._check_abort()
                self.cv.wait()
            sigs = {m: vals[m][0] for m in group}
            first = sigs[group[0]]
            bad = [m for m in group if sigs[m] != first]
            if bad:
                m = bad[0]
                self._fail(CollectiveError(
                    "ranks disagree at %s: rank %d has %s, rank %d (%s) has %s"
                    % (what, group[0], _sig(first), m, vals[m][2], _sig(sigs[m])), code="NCC_ECCL001"))
                self._check_abort()
            out = [vals[m][1] for m in group]
            self.state[rank] = _RUN
            self.at[rank] = None
            self.waitkey[rank] = None
            slot["read"].add(rank)
            if len(slot["read"]) == len(group):
                del self.slots[key]
            return out

    def finish(self, rank):
        with self.cv:
            self.state[rank] = _DONE
            self.cv.notify_all()

    def fail(self, rank, exc):
        with self.cv:
            self.state[rank] = _FAILED
            if not isinstance(exc, _Abort):
                self._fail(exc)

    # -- internals ---------------------------------------------------------------
    def _fail(self, exc):
        if self.error is None:
            self.error = exc
        self.cv.notify_all()

    def _check_abort(self):
        if self.error is not None:
            raise _Abort()

    def _anyone_can_arrive(self, group, vals):
        # a missing member that is still running may arrive; one waiting elsewhere may arrive
        # later only if some rank is running (it can release it)
        return any(self._live(m) for m in range(self.n))

    def _live(self, m):
        """Rank m runs, or waits in a slot that is complete (it is about to run)."""
        st = self.state[m]
        if st == _RUN:
            return True
        if st != _WAIT:
            return False
        slot = self.slots.get(self.waitkey[m])
        return slot is not None and all(x in slot["vals"] for x in self.waitkey[m][0])

    def _deadlock_message(self, rank, group, vals, what):
        missing = [m for m in group if m not in vals]
        parts = []
        for m in missing:
            st = self.state[m]
            if st == _WAIT:
                parts.append("rank %d waits in %s" % (m, self.at[m]))
            else:
                parts.append("rank %d %s without reaching it" % (m, st))
        return ("collective deadlock: rank %d waits in %s, which %s never reach(es): %s"
                % (rank, self.at[rank] or what, _ids(missing), "; ".join(parts)))


def _ids(xs):
    xs = list(xs)
    if len(xs) > 8:
        return "{%s, ... %d ranks}" % (", ".join(str(x) for x in xs[:6]), len(xs))
    return "{%s}" % ", ".join(str(x) for x in xs)


def _sig(s):
    return ", ".join("%s" % (x,) for x in s) if isinstance(s, tuple) else str(s)


def run_ranks(n, fn):
    """[fn(rank, rv) for rank in range(n)], each in its own thread; the first error is raised."""
    rv = Rendezvous(n)
    results = [None] * n
    errors = [None] * n

    def body(r):
        try:
            results[r] = fn(r, rv)
            rv.finish(r)
        except _Abort as e:
            errors[r] = e
            rv.fail(r, e)
        except BaseException as e:   # noqa: B902 - handed to the caller below
            errors[r] = e
            rv.fail(r, e)

    if n == 1:
        body(0)
    else:
        threads = [threading.Thread(target=body, args=(r,), name="rank%d" % r, daemon=True) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if rv.error is not None:
        raise rv.error
    for e in errors:
        if e is not None and not isinstance(e, _Abort):
            raise e
    return results
