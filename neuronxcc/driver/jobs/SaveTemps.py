"""SaveTemps (in-process): keep the work directory and write a replayable snapshot.

``--pipeline compile SaveTemps`` keeps the work dir (its path is logged as
"Artifacts stored in: ...") and writes ``snapshot.tar.gz`` into it: the
input, the compile flags and the versions (see ``support/Snapshot.py``).
``snapshot-unpack snapshot.tar.gz -o DIR`` unpacks it with a replay script.
SaveTemps also runs after a failed job so a failing compile can be replayed.
"""
from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class SaveTemps(Job):
    done = False

    def runSingleInput(self, state):
        from neuronxcc.driver.jobs.support.Snapshot import writeSnapshot

        state.keep_workdir = True
        path = writeSnapshot(state, files.SNAPSHOT)
        self.done = True
        self.log("Snapshot of this compile stored in %s" % state.path(path), level=20)
