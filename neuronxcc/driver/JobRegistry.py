"""JobRegistry: job name -> Job class, discovered from neuronxcc.driver.jobs.

Discovery (``loadAllJobs``) walks ``neuronxcc.driver.jobs`` with
``pkgutil.iter_modules`` (skipping ``rejected_job_names``) and imports each
module under ``sys.setdlopenflags(old | os.RTLD_DEEPBIND)``, restoring the
old flags after the import whether it succeeded or raised ImportError (a job
whose module cannot be imported is logged and left out). Every Job subclass
a module defines is registered by its class name, so one module can hold a
family (XLAInferGoldens.py defines InferGoldens and XLAInferGoldens).

``job_factories`` is a defaultdict whose missing key raises
``CompilerInvalidInputException`` naming the unknown job. ``makePipeline``
turns a list of names into a ``Pipeline`` in exactly that order.
"""
import collections
import importlib
import inspect
import logging
import os
import pkgutil
import sys

from neuronxcc.errors import CompilerInvalidInputException

JOBS_PACKAGE = "neuronxcc.driver.jobs"


class default_dict_with_key(collections.defaultdict):
    """A defaultdict whose factory sees the missing key; here it raises for an unknown job."""

    def __missing__(self, key):
        raise CompilerInvalidInputException("Unknown job name '%s' (known jobs: %s)"
                                            % (key, ", ".join(sorted(self))))


class JobRegistry:
    # Modules under neuronxcc.driver.jobs that are not jobs.
    rejected_job_names = ("support",)

    def __init__(self):
        self.log = logging.getLogger("neuronxcc.driver.JobRegistry")
        self.job_factories = default_dict_with_key(None)
        self.loadAllJobs()

    def loadAllJobs(self):
        pkg = importlib.import_module(JOBS_PACKAGE)
        for _, modname, _is_pkg in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda t: t[1]):
            if modname in self.rejected_job_names or modname.startswith("_"):
                continue
            self.__getJobFactory(modname)

    def __getJobFactory(self, name):
        old = sys.getdlopenflags()
        sys.setdlopenflags(old | os.RTLD_DEEPBIND)
        try:
            try:
                mod = importlib.import_module(JOBS_PACKAGE + "." + name)
            except ImportError as exception:
                self.log.warning("Could not import '%s': %s", name, exception)
                return None
        finally:
            sys.setdlopenflags(old)  # restored on success, on ImportError and on anything else
        try:
            where = inspect.getfile(mod)
        except TypeError:
            where = "?"
        self.log.debug("Found %s at %s", name, where)
        from neuronxcc.driver.Job import Job

        found = None
        for obj in vars(mod).values():
            if (inspect.isclass(obj) and issubclass(obj, Job) and obj is not Job
                    and obj.__module__ == mod.__name__):
                self.job_factories[obj.__name__] = obj
                if obj.__name__ == name:
                    found = obj
        return found

    def getJobNames(self):
        return sorted(self.job_factories)

    def getJobClass(self, name):
        return self.job_factories[name]

    def RegisterArgs(self, parser):
        """Let every job class add its own flags (each class once, in name order)."""
        seen = set()
        for name in sorted(self.job_factories):
            cls = self.job_factories[name]
            reg = cls.__dict__.get("RegisterArgs")
            if reg is not None and cls not in seen:
                seen.add(cls)
                cls.RegisterArgs(parser)

    def makePipeline(self, jobnames, state=None, name="compile"):
        from neuronxcc.driver.Pipeline import Pipeline

        pipeline = Pipeline(name)
        for jobname in jobnames:
            pipeline.addJob(self.job_factories[jobname](state))
        return pipeline
