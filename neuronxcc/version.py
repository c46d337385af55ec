"""The one place the package version lives (read by setup and --version)."""
__version__ = "2.24.0.0+open"
# Version of the hardware model (neuronxcc.hwm) reported by --version.
__hwm_version__ = "2.24.0.0+open"
