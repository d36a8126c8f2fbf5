"""Run Megatron-LM's own argument parser and validate_args on an emitted megatron.sh (a subprocess:
the CPU shims below must not leak into other tests).

Shims, as reference/frameworks.md §3c documents them: typing.override for Python 3.11, WORLD_SIZE,
and the GPU queries in validate_args (device arch; compute capability for --moe-grouped-gemm) answered
as Hopper.
Usage: python -m tests.verify.megatron_validate WORLD_SIZE megatron.sh MODEL_ARGS...
"""

import os
import shlex
import sys
import typing

import typing_extensions

typing.override = typing_extensions.override  # megatron.training uses the 3.12 name


def main() -> None:
    world, path, model_args = sys.argv[1], sys.argv[2], sys.argv[3:]
    show_model = "--print-model" in model_args
    model_args = [a for a in model_args if a != "--print-model"]
    text = open(path).read()
    os.environ.update(WORLD_SIZE=world, RANK="0")
    if "export CUDA_DEVICE_MAX_CONNECTIONS=1" in text:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    import megatron.training.arguments as arguments

    arguments.get_device_arch_version = lambda: 9
    arguments.torch.cuda.get_device_capability = lambda *_: (9, 0)  # --moe-grouped-gemm asks the GPU too
    line = next(x for x in text.splitlines() if x.startswith("PLACEMENT_ARGS=("))
    sys.argv = ["pretrain_gpt.py", *shlex.split(line[len("PLACEMENT_ARGS=("):-1]), *model_args]
    args = arguments.parse_args()
    arguments.validate_args(args)
    print("VALID", args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size,
          args.data_parallel_size, args.virtual_pipeline_model_parallel_size, args.expert_model_parallel_size)
    print("PRECISION", args.params_dtype, args.fp8)
    if show_model:
        fields = ("hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "normalization",
                  "position_embedding_type", "num_experts", "moe_router_topk", "moe_ffn_hidden_size",
                  "multi_latent_attention", "kv_lora_rank", "rotary_percent", "rotary_base",
                  "moe_router_score_function", "moe_router_pre_softmax", "moe_router_enable_expert_bias",
                  "moe_router_topk_scaling_factor")
        print("MODEL", *(f"{k}={getattr(args, k, None)}" for k in fields))


if __name__ == "__main__":
    main()
