"""``neuronxcc.nki._private_kernels``: the kernels the original ships privately and framework code
imports by these paths (our own implementations, same signatures): ``attention.attention_isa_kernel``."""
