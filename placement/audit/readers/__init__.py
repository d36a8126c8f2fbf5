"""The audit's readers of launch material, one module per framework (as `placement/emit/` writes it): megatron
(scripts, recipe flags, Megatron-Bridge YAML and overrides, training logs), torchtitan, deepspeed, neox
(GPT-NeoX), maxtext; `common` holds what they share, `dispatch` picks the reader of each file, and `reading`
the typed result every reader hands the core."""
