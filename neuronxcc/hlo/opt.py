"""``hlo-opt``: run HLO-to-HLO passes over a module, like XLA's tool of that name.

    hlo-opt --input X --output Y --passes dce,cse [--input-type proto|text] [--output-type proto|text]
    hlo-opt --list-passes

NxD runs ``hlo-opt --input X --output Y --passes convert-inputs-to-optimal-shape
--input-type proto --output-type proto``. The input format is found from the
content unless --input-type names it (then a mismatch is an error); the
output is an HloModuleProto unless --output-type text. Pass names come from
the one registry in ``neuronxcc.hlo.passes``; an unknown name fails with the
list of known ones.
"""
import logging
import sys

from neuronxcc.common import toolshell
from neuronxcc.errors import CompilerInvalidInputException, HloParseError
from neuronxcc.hlo import module_to_proto_bytes, module_to_text

log = logging.getLogger("neuronxcc.hlo.opt")


def _parser():
    p = toolshell.ToolParser(prog="hlo-opt", description="Run HLO passes over an HLO module.")
    p.add_argument("input_pos", nargs="?", metavar="INPUT", help="the input module (same as --input)")
    p.add_argument("--input", help="the input module: HloModuleProto, HloProto, HLO text or model directory")
    p.add_argument("--output", help="where to write the result (default: stdout for text)")
    p.add_argument("--passes", default="", help="comma-separated pass names, run in order")
    p.add_argument("--input-type", choices=("proto", "text"), help="require this input format")
    p.add_argument("--output-type", choices=("proto", "text"), default="proto", help="output format (proto)")
    p.add_argument("--list-passes", action="store_true", help="print the known passes and exit")
    return p


def _body(argv):
    from neuronxcc.hlo import passes
    from neuronxcc.hlo.loader import detect_format, load_module, read_input_bytes
    args = _parser().parse_args(argv)
    if args.list_passes:
        for name, doc in passes.pass_descriptions():
            sys.stdout.write("%-34s %s\n" % (name, doc))
        return 0
    src = args.input or args.input_pos
    if not src:
        raise CompilerInvalidInputException("hlo-opt: --input is required")
    pipeline = passes.make_pipeline(args.passes.split(",")) if args.passes else []
    import os
    if args.input_type and not os.path.isdir(src):
        fmt = detect_format(read_input_bytes(src))
        if fmt == "metadata-json":
            fmt = "proto"
        if fmt != args.input_type:
            raise HloParseError("hlo-opt: --input-type %s but %s holds HLO %s" % (args.input_type, src, fmt))
    module = load_module(src)
    changed = passes.run_pipeline(module, pipeline)
    if args.output_type == "text":
        data = module_to_text(module).encode("utf-8")
    else:
        data = module_to_proto_bytes(module)
    if args.output:
        toolshell.atomic_write(args.output, data)
    elif args.output_type == "text":
        sys.stdout.write(data.decode("utf-8"))
    else:
        raise CompilerInvalidInputException("hlo-opt: --output is required for proto output")
    log.info("hlo-opt: ran %d passes (%s changed the module)", len(pipeline), ", ".join(changed) or "none")
    return 0


def main(argv=None):
    toolshell.console_logging()
    return toolshell.run_main("hlo-opt", _body, argv, log, prefix=False)
