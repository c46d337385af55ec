"""``neuronx-cc neff-info FILE``: a readable dump of a NEFF (header, members, variables).

Dispatchable but absent from the usage banner, as in the original. The text
comes from ``neuronxcc.neff.info.format_neff_info``.
"""
import os

from neuronxcc.driver.Arguments import InterceptingArgumentParser
from neuronxcc.driver.commands.CommandInterface import CommandInterface
from neuronxcc.errors import InputFileError


class NeffInfoCommand(CommandInterface):
    inBanner = False

    def getCommandName(self):
        return "neff-info"

    def getDescription(self):
        return "Show the contents of a NEFF"

    def run(self, argv, logfile=None):
        p = InterceptingArgumentParser(prog="neuronx-cc neff-info", description=self.getDescription())
        p.add_argument("neff", help="the NEFF file")
        args = p.parse_args(argv)
        if os.path.isdir(args.neff):
            raise InputFileError("%s is a directory, not a NEFF file" % args.neff)
        if not os.path.isfile(args.neff):
            raise InputFileError("NEFF file not found: %s" % args.neff)

        from neuronxcc.neff.info import format_neff_info
        text = format_neff_info(args.neff)
        print(text.rstrip("\n"))
        return 0
