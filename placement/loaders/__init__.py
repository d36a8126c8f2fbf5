"""Loaders: turn files in other formats (HuggingFace config.json, ...) into validated specs."""
