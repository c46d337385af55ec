"""``--target`` lookup for the walrus tools (their parser and exit contract are the one tool
shell, ``neuronxcc.common.toolshell``)."""
from neuronxcc import errors


def get_target(name, prog):
    """hwm target model for ``--target name``; unknown names are bad input of tool ``prog``."""
    from neuronxcc.hwm import get_target as _get, known_targets
    try:
        return _get(name)
    except KeyError:
        raise errors.InvalidArgumentError(
            "%s: unknown --target '%s' (known: %s)" % (prog, name, ", ".join(known_targets()))) from None
