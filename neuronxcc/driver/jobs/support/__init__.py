"""neuronxcc driver layer."""
