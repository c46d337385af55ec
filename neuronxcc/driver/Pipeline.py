"""Pipeline: an ordered list of Job instances run one after another.

The order is exactly the order jobs were added (CompileCommand's collector
lists, concatenated); there is no scheduling here. Each job is timed and
logged with "Starting job" / "Finished job"; the pipeline logs "Running
pipeline" and "Finished pipeline". The per-job times are kept in
``job_times`` (name -> seconds) for the compile's metrics.

Before each job the modules the jobs after it import (``Job.prefetchModules``) are handed to
``ToolProcess.prefetch``, which imports them while a forked tool runs (the order of the jobs and
what each does are unchanged).
"""
import logging
import time

from neuronxcc.driver import ToolProcess

logger = logging.getLogger("neuronxcc.driver.Pipeline")


class Pipeline:
    def __init__(self, name="compile"):
        self.name = name
        self.jobs = []
        self.job_times = {}

    def addJob(self, job):
        self.jobs.append(job)
        return job

    def getJobNames(self):
        return [j.getName() for j in self.jobs]

    def __len__(self):
        return len(self.jobs)

    def __iter__(self):
        return iter(self.jobs)

    def runSingleInput(self, state, on_job_start=None):
        """Run every job on ``state``; the first failure propagates (later jobs do not run)."""
        logger.info("Running pipeline %s %d", self.name, len(self.jobs))
        t_pipe = time.perf_counter()
        try:
            self._runJobs(state, on_job_start)
        finally:
            ToolProcess.prefetch.set(())
        logger.info("Finished pipeline %s in %.3f seconds", self.name, time.perf_counter() - t_pipe)

    def _prefetchAfter(self, i, state):
        mods = []
        for job in self.jobs[i + 1:]:
            try:
                mods += list(job.prefetchModules(state))
            except Exception:  # a hint only: a job that cannot say gets nothing prefetched
                pass
        return mods

    def _runJobs(self, state, on_job_start):
        for i, job in enumerate(self.jobs):
            ToolProcess.prefetch.set(self._prefetchAfter(i, state))
            name = job.getName()
            if on_job_start is not None:
                on_job_start(name)
            logger.info("Starting job %s", name)
            t0 = time.perf_counter()
            try:
                job.run(state)
            finally:
                self.job_times[name] = self.job_times.get(name, 0.0) + time.perf_counter() - t0
            logger.info("Finished job %s in %.3f seconds", name, self.job_times[name])
