"""The original's backend package path (``compiler.backends.neuron``)."""
