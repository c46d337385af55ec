"""``neuronx-cc list-operators --framework XLA``: the HLO opcodes that compile, one per line.

The table is the HLO layer's (``neuronxcc.hlo.ops.supported_opcodes``: the op
table's rows minus ``NOT_LOWERED``, the ones the lowering refuses), the same
one the reference interpreter and the frontend use.
"""
from neuronxcc.driver.Arguments import InterceptingArgumentParser
from neuronxcc.driver.commands.CommandInterface import CommandInterface


class ListOperatorsCommand(CommandInterface):
    def getCommandName(self):
        return "list-operators"

    def getDescription(self):
        return "List supported operators"

    def run(self, argv, logfile=None):
        p = InterceptingArgumentParser(prog="neuronx-cc list-operators", description=self.getDescription())
        p.add_argument("--framework", type=str.upper, choices=("XLA",), default="XLA")
        p.parse_args(argv)

        from neuronxcc.hlo.ops import supported_opcodes
        for name in supported_opcodes():
            print(name)
        return 0
