"""birverifier and ``verify_module`` (also run between passes with
--verify-between-passes): ``birpy.verify`` (machine rules) and walrus's own
checks: every memloc allocated inside its memory, PSUM values inside one bank.
"""
import logging

from neuronxcc import errors
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")


def verify_module(module, ctx):
    B.verify(module, ctx.target.name)
    for ml in module.memlocs.values():
        if not ml.allocated:
            continue
        if ml.memory == "PSUM":
            cap, bank = ctx.target.psum_partition_bytes, ctx.target.psum_bank_bytes
            first, last = ml.byte_offset // bank, (ml.byte_offset + ml.bytes_per_partition - 1) // bank
            if ml.bytes_per_partition <= bank and first != last:
                raise errors.BirVerifyError("PSUM memloc '%s' at byte %d crosses a %d-byte bank"
                                            % (ml.name, ml.byte_offset, bank))
        else:
            cap = ctx.target.sbuf_usable_bytes
        if ml.byte_offset + ml.bytes_per_partition > cap or \
                ml.start_partition + ml.partitions > ctx.target.num_partitions:
            raise errors.BirVerifyError("memloc '%s' (%dx%d B at p%d+%d) is outside %s"
                                        % (ml.name, ml.partitions, ml.bytes_per_partition, ml.start_partition,
                                           ml.byte_offset, ml.memory))


class BirVerifier(WalrusPass):
    name = "birverifier"

    def run(self, module, ctx):
        verify_module(module, ctx)
        log.info("birverifier: module verified")
        return False
