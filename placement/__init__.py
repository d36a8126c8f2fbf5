"""placement: choose and map the parallel layout of a large-model training job onto a GPU cluster."""

__version__ = "0.1.0"
