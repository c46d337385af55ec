"""``nki_samples.reference``: our kernels at the samples' module names (see the package doc)."""
