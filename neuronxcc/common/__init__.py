"""The vocabulary every layer shares: element types (``dtypes``), numerical tolerances
(``tolerances``), the tool shell (``toolshell``).

Invariant: nothing here imports another neuronxcc layer (only ``neuronxcc.errors``, numpy
and ml_dtypes), so every layer -- HLO, Penguin, BIR, birsim, walrus, the driver -- can import
it without a circle (tests/test_layering.py checks).
"""
