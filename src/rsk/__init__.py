"""rsk: run coding agents' work on remote Slurm clusters, with a human's hand on the budget."""

__version__ = "0.5.0"
