"""CommandInterface: the base of the driver's subcommands.

``CommandDriver`` builds its ``known_commands`` table from the subclasses of
this class, keyed by ``getCommandName()``; adding a command is adding a
subclass. ``run(argv)`` returns an exit status; errors a user can cause are
raised as ``CompilerError`` and turned into one console line by the driver.
"""


class CommandInterface:
    # Listed in the top-level usage banner? (neff-info is not.)
    inBanner = True

    def getCommandName(self):
        raise NotImplementedError

    def getDescription(self):
        return ""

    def run(self, argv, logfile=None):
        raise NotImplementedError
