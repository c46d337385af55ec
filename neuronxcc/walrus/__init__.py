"""walrus: the backend. Passes over BIR named as in ``--walrus-passes``."""
