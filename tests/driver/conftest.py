"""Fixtures for the driver tests."""
import os

import pytest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ADD_PB = os.path.join(DATA, "add.hlo_module.pb")
ADD_TXT = os.path.join(DATA, "add.hlo")


@pytest.fixture(scope="module")
def compile_command():
    from neuronxcc.driver.commands.CompileCommand import CompileCommand

    return CompileCommand()


@pytest.fixture
def build(compile_command):
    """build(*flags) -> (job-name list, args, command) for `compile add.hlo_module.pb FLAGS`."""

    def _build(*flags, inp=ADD_PB):
        pipeline, args = compile_command.buildPipeline([inp] + list(flags))
        assert pipeline.getJobNames() == compile_command.pipeline
        return list(compile_command.pipeline), args, compile_command

    return _build
