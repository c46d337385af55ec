"""A stand-in for nki-samples' ``nki_samples`` package whose ``reference`` modules resolve to this project's
``neuronxcc.nki.kernels`` (the original ships nki-samples' reference kernels as that namespace), so nki-samples'
unit tests run unchanged against our kernels: put ``scripts/nki_samples_shim`` on the path instead of the
samples' ``src`` (see scripts/run_nki_sdk_tests.py)."""
