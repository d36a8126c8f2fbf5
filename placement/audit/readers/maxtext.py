"""MaxText 0.2.5 launch material for the audit: its config YAML, `key=value` overrides on a launch script's train
command (which win), and the jax_mesh.py that `--emit maxtext` writes (the process order and each host's GPU
order).  MaxText's own rules (base.yml defaults, mesh fills, batch arithmetic, the ZeRO stage a mesh runs) are in
`placement.audit.maxtext`."""

from __future__ import annotations

import difflib
from pathlib import Path

from placement.audit import maxtext
from placement.audit.readers.common import device_indices, merge, nccl_settings, runtime_settings
from placement.audit.readers.reading import NodeDevices, Reading, Settings
from placement.audit.shell import Command, read_commands
from placement.errors import InputError

UNKNOWN_KEY_CHECK = ("configs/pyconfig.py:262-271 _prepare_for_pydantic (since 81d653c93, 2025-11-14): "
                     "a key _check_for_invalid_keys does not find among MaxTextConfig's fields raises "
                     "ValueError(f\"{key!r} not in {', '.join(map(repr, valid_fields))}.\")")
"""MaxText's refusal of a config or command-line key it does not define."""
KNOWN_KEYS = frozenset("""
abort_on_inf_loss abort_on_nan_loss act_quantization_calibration_method activation_dropout_for_audio
activation_function_for_audio activations_in_float32 adam_b1 adam_b2 adam_eps adam_eps_root adam_weight_decay
adamw_mask add_bos add_eos algo allow_split_physical_axes ar_cache_axis_order async_checkpointing
async_scheduling attention attention_bias attention_dropout_for_audio attention_for_vit attention_out
attention_output_dim attention_sink attention_type attn_logits_soft_cap attn_module_name audio_path
audio_placeholder autoregressive_decode_assert base_config base_emb_dim base_mlp_dim base_moe_mlp_dim
base_num_decoder_layers base_num_kv_heads base_num_query_heads base_output_directory batch_split_factor
beta_fast beta_slow blend_cache_dir blend_index_dir block_diffusion_canvas_policy
block_diffusion_logit_alignment block_diffusion_mask_id block_diffusion_min_noise block_state_before_run_start
bwd_quantization_calibration_method capacity_factor cast_logits_to_fp32 causal_block_size chat_template
chat_template_path check_vma checkpoint_conversion_fn checkpoint_dir checkpoint_is_quantized checkpoint_period
checkpoint_storage_concurrent_gb checkpoint_storage_device_host_concurrent_gb
checkpoint_storage_target_data_file_size_bytes checkpoint_storage_use_ocdbt checkpoint_storage_use_zarr3
checkpoint_todelete_full_path checkpoint_todelete_subdir chunk_attn_window_size colocated_python_checkpointing
colocated_python_data_input communication_overlapping_alpha compile_topology compile_topology_num_slices
compile_xla_flags compiled_trainstep_file compress_ratios compressed_rope_max_timescale compute_axis_order
constant_bound_config context context_parallel_load_balance context_parallel_reorder_strategy
context_parallel_strategy context_sharding conv_chunksize_for_audio conv_stride_for_vit
convert_checkpoint_if_possible cost_estimate_flops_bwd cost_estimate_flops_fwd csa_qk_head_chunk_size
custom_mesh custom_mesh_and_rule custom_mesh_and_rule_for_eval d_model_for_audio data_sharding data_shuffle_seed
data_template_path dataset_name dataset_path dataset_type dcn_autoregressive_parallelism dcn_bandwidth_burst
dcn_bandwidth_interface dcn_bandwidth_latency dcn_bandwidth_limit dcn_context_autoregressive_parallelism
dcn_context_parallelism dcn_context_usp_ulysses_parallelism dcn_data_parallelism dcn_diloco_parallelism
dcn_expert_parallelism dcn_fsdp_parallelism dcn_fsdp_transpose_parallelism dcn_parallelism
dcn_pipeline_parallelism dcn_sequence_parallelism dcn_tensor_parallelism dcn_tensor_sequence_parallelism
debug_converter debug_sharding decode_sampling_nucleus_p decode_sampling_strategy decode_sampling_temperature
decode_sampling_top_k decoder_block decoder_layer_input deepstack_visual_indexes_for_vit default_prompt
defer_small_all_reduces dense_fsdp_use_two_stage_all_gather dense_init_scale diloco_outer_lr
diloco_outer_momentum diloco_sync_period distill_alpha distill_alpha_end distill_alpha_schedule distill_beta
distill_beta_end distill_beta_schedule distill_feature_loss_type distill_layer_indices
distill_student_weights_share_map distill_temperature distill_temperature_end distill_temperature_schedule
distill_weights_copy_map downsample_hidden_size_for_audio dpo dpo_beta dpo_label_smoothing dq_reduction_steps
drhs_grad_quantization_calibration_method dropout_rate dtype dtype_mm dump_hlo dump_hlo_delete_local_after
dump_hlo_gcs_dir dump_hlo_local_dir dump_hlo_local_module_name dump_hlo_module_name dump_hlo_upload_all
dump_hlo_xla_flags dump_jaxpr dump_jaxpr_delete_local_after dump_jaxpr_gcs_dir dump_jaxpr_local_dir dump_step
elastic_backup_kind elastic_enabled elastic_max_retries elastic_min_slice_count elastic_timeout_seconds emb_dim
enable_autocheckpoint enable_checkpoint_cloud_logger enable_checkpointing enable_continuous_checkpointing
enable_data_shuffling enable_diloco enable_dp_attention enable_dropout enable_emergency_checkpoint
enable_expert_parallel enable_gcp_goodput_metrics enable_gcp_step_deviation_metrics enable_goodput_recording
enable_jax_profiler enable_llm_inference_pool enable_lora enable_mhc_lite enable_mllog enable_model_warmup
enable_multi_tier_checkpointing enable_orbax_v1 enable_padding_causal_mask enable_pathways_goodput
enable_prefix_caching enable_rampup_batch_size enable_single_controller enable_single_replica_ckpt_restoring
enable_streaming_diloco enable_tensorboard enable_tpu_profiling_options enable_wandb
encoder_attention_heads_for_audio encoder_ffn_dim_for_audio encoder_layers_for_audio engram engram_head_dim
engram_kernel_size engram_layers engram_max_ngram_size engram_num_heads engram_seed engram_vocab_bases
eod_mask_loss eval_data_columns eval_dataset_name eval_image_column eval_interval eval_local_sa_block_kv
eval_local_sa_block_kv_compute eval_local_sa_block_q eval_local_sa_k_layout eval_local_sa_q_layout
eval_local_sa_v_layout eval_per_device_batch_size eval_ragged_buffer_factor eval_sa_block_kv
eval_sa_block_kv_compute eval_sa_block_q eval_sa_k_layout eval_sa_q_layout eval_sa_v_layout eval_split
eval_start_step eval_steps eval_wi_tile_fwd_batch_seq eval_wi_tile_fwd_embed_dim eval_wi_tile_fwd_mlp_dim
eval_wo_tile_fwd_batch_seq eval_wo_tile_fwd_embed_dim eval_wo_tile_fwd_mlp_dim expansion_factor_real_data
experimental_sa_quant_k_fp8 experimental_sa_quant_q_fp8 final_logits_soft_cap first_num_dense_layers
first_num_hash_layers first_phase_ragged_buffer_factor float32_gate_logits float32_logits float32_qk_product
float32_weight_sum force_q_layout force_unroll formatting_func_kwargs formatting_func_path
free_kv_cache_during_weight_sync freeze_audio_encoder_params freeze_vision_encoder_params fuse_expert_scales
fused_mlp fused_qkv gcs_debug_path gcs_metrics gdn_chunk_size gdn_conv_kernel_dim gdn_key_head_dim
gdn_mamba_block_size gdn_num_key_heads gdn_num_value_heads gdn_value_head_dim generate_padding_batch_eval
generate_padding_batch_train generate_slice global_batch_size_to_eval_on global_batch_size_to_load
global_batch_size_to_load_eval global_batch_size_to_load_increment global_batch_size_to_load_start
global_batch_size_to_train_on global_head_dim global_num_kv_heads global_parameter_scale global_rampup_samples
global_rope_max_timescale global_rope_proportion goodput_job_name goodput_upload_interval_seconds grad_dtype
gradient_accumulation_steps gradient_clipping_threshold grain_data_source_max_workers grain_eval_files
grain_file_type grain_index_storage_option grain_num_threads grain_num_threads_eval grain_packing_type
grain_per_worker_buffer_size grain_per_worker_buffer_size_eval grain_prefetch_buffer_size
grain_prefetch_buffer_size_eval grain_ram_budget_mb grain_shuffle_buffer_size grain_train_files
grain_train_mixture_config_path grain_use_elastic_iterator grain_worker_count grain_worker_count_eval hardware
hbm_utilization_vllm head_dim heartbeat_reporting_interval_in_seconds hf_access_token hf_data_dir hf_eval_files
hf_eval_split hf_lora_adapter_path hf_name hf_path hf_train_files hidden_size_for_vit
hidden_size_per_layer_input hide_profiler_step_metric ici_autoregressive_parallelism
ici_context_autoregressive_parallelism ici_context_parallelism ici_context_usp_ulysses_parallelism
ici_data_parallelism ici_diloco_parallelism ici_expert_parallelism ici_fsdp_parallelism
ici_fsdp_transpose_parallelism ici_parallelism ici_pipeline_parallelism ici_sequence_parallelism
ici_tensor_parallelism ici_tensor_sequence_parallelism image_path image_placeholder image_size_for_vit
indexer_approx_top_k_recall indexer_cutoff_threshold indexer_head_dim indexer_loss_scaling_factor
indexer_mask_exact_topk indexer_n_heads indexer_sparse_training indexer_topk indexer_use_approx_top_k
inference_benchmark_test inference_metadata_file inference_microbenchmark_log_file_path
inference_microbenchmark_loop_iters inference_microbenchmark_num_samples
inference_microbenchmark_prefill_lengths inference_microbenchmark_stages inference_server
inhomogeneous_layer_cycle_interval init_weights_seed input_data_sharding_logical_axes interleave_moe_layer_step
intermediate_size_for_vit internal_compile internal_compile_num_devices jax_cache_dir jax_debug_log_modules
jax_distributed_initialization_timeout jax_profiler_port key_proj kv_cache_buffer kv_lora_rank kv_proj
kv_quant_axis kv_quant_dtype kv_tp_size kv_wa_proj learn_to_init_mode learning_rate learning_rate_final_fraction
learning_rate_schedule_steps load_balance_loss_weight load_checkpoint_only_once load_from_prefill_dir
load_full_state_path load_parameters_path local_checkpoint_directory local_checkpoint_period
local_rope_max_timescale local_rope_proportion local_sa_block_kv local_sa_block_kv_compute local_sa_block_kv_dkv
local_sa_block_kv_dkv_compute local_sa_block_kv_dq local_sa_block_q local_sa_block_q_dkv local_sa_block_q_dq
local_sa_fuse_reciprocal local_sa_k_layout local_sa_q_layout local_sa_use_base2_exp
local_sa_use_fused_bwd_kernel local_sa_v_layout local_use_splash_scheduler log_config log_moe_bias_norms
log_period log_required_ragged_buffer_factor log_step_diagnostics log_weight_sync_time logical_axis_rules
logical_axis_rules_for_eval logits_dot_in_fp32 logits_proj_quant_calibration_method logits_via_embedding lora
lora_alpha lora_input_adapters_path lora_module_path lora_rank lora_restore_path lora_tile_size
lora_weight_qtype lr_schedule_type lti_layer_indices lti_use_general_linear_map managed_mldiagnostics
managed_mldiagnostics_dir managed_mldiagnostics_on_demand_profiling managed_mldiagnostics_region
managed_mldiagnostics_run_group managed_mldiagnostics_storage_path matmul_precision max_checkify
max_corpus_chars max_inflight_computations max_num_batched_tokens max_num_checkpoints_to_keep
max_num_images_per_example max_num_seqs max_position_embeddings max_prefill_predict_length max_prompt_length
max_sample_len_for_audio max_segments_per_seq max_source_positions_for_audio max_target_length
max_timescale_for_audio megablox merge_gating_gmm mesh_axes metrics_dir metrics_file mhc_expansion_rate
mhc_pallas_kernel_bwd_block_size mhc_pallas_kernel_bwd_feature_block_size mhc_pallas_kernel_fwd_block_size
micro_batch_size_to_eval_on micro_batch_size_to_train_on mla_kv mla_naive_kvcache mla_q mla_qk_head_chunk_size
mllog_file mlp_activations mlp_activations_limit mlp_bias mlp_dim mlpwi mlpwi_0 mlpwi_1 mlpwo mmap_eod_id
mmap_npy_split mmap_split_sentences moba moba_chunk_size moba_topk model_call_mode model_name moe_chunk_barrier
moe_dispatch_no_expert_sharding moe_dropless_fallback moe_ep_all_gather_sparse_core_id moe_expert_input_dim
moe_fsdp_all_gather_sparse_core_id moe_fsdp_use_two_stage_all_gather moe_log_max_load_ratio moe_mlp_dim
moe_mlp_tp_size moe_mlpwi_0 moe_mlpwi_1 moe_mlpwo moe_pin_sparse_core_all_gathers
moe_pin_sparse_core_ep_all_gathers moe_pin_sparse_core_fsdp_all_gathers
moe_pin_sparse_core_fsdp_all_gathers_fwd_only moe_quantize_combine_bwd_method moe_quantize_token_all_gather
moe_routing_maps moe_topk_before_ep_all_gather moe_use_direct_token_gather moe_use_megatron_seq_aux_loss
moe_x_sorted monitor_goodput monitor_step_time_deviation mrope_section mscale mtc_data_parallelism
mtp_eval_target_module mtp_loss_scaling_factor mtp_num_layers mtp_reuse_input_embedding mu_dtype multi_sampling
multi_tier_checkpointing_backup_interval_minutes multi_tier_checkpointing_backup_interval_steps muon_beta
muon_consistent_rms muon_include_routers muon_type muon_use_all_to_all muon_weight_decay n_routing_groups
n_window_for_audio n_window_infer_for_audio nope_layer_interval norm_topk_prob normalization_layer_epsilon
normalize_embedding_logits num_attention_heads_for_vit num_channels_for_vit num_communication_overlapping_steps
num_conv_layers_for_audio num_decoder_layers num_diloco_fragments num_diloco_replicas num_epoch num_experts
num_experts_per_tok num_hidden_layers_for_vit num_kv_heads num_kv_shared_layers num_layers_per_pipeline_stage
num_mel_bins_for_audio num_moe_emb_chunks num_moe_token_chunks num_pipeline_microbatches num_pipeline_repeats
num_position_embeddings_for_vit num_query_heads num_slices num_target_devices num_vocab_tiling o_groups
o_lora_rank offline_data_dir olmo_apply_ngram_filter olmo_index_path olmo_path_remap_from olmo_path_remap_to
opt_type optimize_mesh_for_tpu_v6e optimizer_memory_host_offload original_max_position_embeddings orpo_lambda
out_hidden_size_for_vit out_proj output_dim_for_audio override_logical_axis_rules override_model_config packing
packing_max_segments_per_sample padded_base_moe_mlp_dim param_scan_axis parameter_memory_host_offload
partial_rotary_factor patch_size_for_vit per_device_batch_size per_device_batch_size_increment
per_device_batch_size_start pipeline_delay_activation_forwarding pipeline_fsdp_ag_once
pipeline_fsdp_ag_per_repeat pipeline_parallel_layers pixel_shuffle_ratio_for_vit posemb_type_for_vit
position_id_per_seconds prefill_cache_axis_order prefill_cache_dir prefill_chunk_size prefill_slice
prefix_caching_dram_byte prefix_caching_hbm_byte prefuse_moe_weights profile_cleanly profile_periodically_period
profile_power_events profiler profiler_steps projector_dropout_for_vit projector_input_dim_for_vit
projector_output_dim_for_vit prometheus_port prompt q_lora_rank qk_clip_threshold qk_nope_head_dim
qk_norm_with_scale qk_rope_head_dim qkv_proj quant_cfg_path quantization quantization_local_shard_count
quantize_kvcache quantize_logits_proj quantize_mtp quantize_router_proj query_proj query_wa_proj
ragged_block_size ragged_buffer_factor ragged_gather_cost_estimate_bytes_accessed
ragged_gather_cost_estimate_flops ragged_gather_fallback ragged_gather_reduce_cost_estimate_bytes_accessed
ragged_gather_reduce_cost_estimate_flops ragged_gather_reduce_fallback ragged_sort_use_single_sparsecore
rampup_end_step rampup_samples_per_increment_to_load record_internal_nn_metrics remat_policy
remat_policy_for_vit remove_size_one_mesh_axis_from_type replicate_quant_scale
replicator_backup_interval_minutes report_heartbeat_metric_for_gcp_monitoring
report_performance_metric_for_gcp_monitoring reset_attention_mask reshape_q retry_dropless_first_steps
return_log_prob return_routed_experts reuse_example_batch ring_scan_unroll rollout_backend
rollout_tensor_parallelism rope_attention_scaling rope_factor rope_interleave rope_linear_scaling_factor
rope_max_timescale rope_min_timescale rope_pairwise rope_theta_for_vit rope_truncate rope_type rope_use_scale
routed_bias routed_bias_update_rate routed_scaling_factor routed_score_func router_topk_matmul_vjp run_name
sa_block_kv sa_block_kv_compute sa_block_kv_dkv sa_block_kv_dkv_compute sa_block_kv_dq sa_block_q sa_block_q_dkv
sa_block_q_dq sa_bwd_dkv_megacore sa_fuse_reciprocal sa_k_layout sa_q_layout sa_use_base2_exp
sa_use_fused_bwd_kernel sa_v_layout save_checkpoint_on_completion save_checkpoint_on_start save_config_to_gcs
save_quantized_params_path scale_embedding_for_audio scan_layers scan_layers_per_stage scan_pipeline_iterations
scan_pipeline_repeats set_remat_policy_on_layers_per_stage set_remat_policy_on_pipeline_iterations
sft_train_on_completion_only shard_embed_moe_on_fsdp shard_exp_on_fsdp shard_mode shard_optimizer_over_data
sharding_strategy sharding_tolerance shardy share_kv_projections shared_experts sinkhorn_iterations
skip_first_n_steps_for_profiler skip_jax_distributed_system skip_step_interval skip_step_on_spikes
skip_step_scaling_factor sliding_window_size source_checkpoint_layout sparse_matmul spatial_merge_size_for_vit
stack_prefill_result_cache standalone_checkpointer_drop_page_cache_before_restore
standalone_checkpointer_enable_restore_in_loop standalone_checkpointer_per_step_interval
standalone_checkpointer_start_from_checkpoint step_deviation_interval_seconds steps stop_strings
student_overrides student_params_to_update subslice_shape swap_space_vllm_gb system_prompt target_eval_loss
te_comm_gemm_overlap te_ep_overflow_check_every_n_steps te_gmm_quantization te_moe_block teacher_overrides
temperature_tuning temporal_patch_size_for_vit tensorboard_dir tensors_on_device tensors_to_offload
tile_size_for_vit tokenize_eval_data tokenize_train_data tokenizer_path tokenizer_type topk_routing_group
tpu_num_chips_to_profile_per_task tpu_num_sparse_core_tiles_to_trace tpu_num_sparse_cores_to_trace
train_data_columns train_image_column train_interleave_cycle_length train_shard_in_read train_split
trainable_parameters_mask trainable_position_size training_objective ulysses_context_sharding
unquantized_modules upload_all_profiler_results use_2d_fsdp_sharding use_audio use_audio_in_video
use_batch_split_schedule use_chat_template use_chunked_prefill use_csa_streamindex_kernel use_custom_sort_vjp
use_double_wide_mlp use_dpo use_gather_mosaic_kernel use_gmm_v2 use_gmm_v2_heuristic_tiling use_grpo use_indexer
use_iota_embed use_jax_splash use_lineage use_m3_model use_manual_quantization use_max_logit_estimate
use_mhc_pallas_kernel use_mla_absorbed_mqa use_mrope use_multimodal use_post_attn_norm use_post_ffw_norm
use_qk_clip use_qk_norm use_qk_norm_in_gdn use_qwix_quantization use_ragged_attention use_ragged_sort
use_raiden_ffi use_random_routing use_replicator_service use_ring_of_experts use_sequential_layers use_sft
use_sliced_mla_proj use_splash_scheduler use_standalone_converter use_stream_chunking use_tokamax_gmm
use_tokamax_splash use_truncation use_tunix_gradient_accumulation use_untrainable_positional_embedding
use_vertex_tensorboard use_weight_converter using_pipeline_parallelism v_head_dim v_norm_with_scale value_proj
vertex_tensorboard_project vertex_tensorboard_region video_max_grid_h video_max_grid_t video_max_grid_w
video_path video_placeholder vision_connector_activation vision_connector_hidden_size
vision_connector_num_layers vision_connector_use_bias vision_encoder_block vision_output_dim_for_vit
vision_output_length vision_projector_type vllm_additional_config vllm_block_size vllm_hf_config_path
vllm_hf_overrides vllm_load_format vocab_size vocab_size_per_layer_input vocab_tiling_ag_once wandb_project_name
wandb_run_name warm_input_reshard_before_run_start warmup_programs_in_init warmup_steps_fraction
weight_block_size weight_dtype weight_quantization_calibration_method weight_sparsity_m weight_sparsity_n
weight_sparsity_start_step weight_sparsity_update_step weight_sync_debug wi_tile_dlhs_batch_seq
wi_tile_dlhs_embed_dim wi_tile_dlhs_mlp_dim wi_tile_drhs_batch_seq wi_tile_drhs_embed_dim wi_tile_drhs_mlp_dim
wi_tile_fwd_batch_seq wi_tile_fwd_embed_dim wi_tile_fwd_mlp_dim wo_tile_dlhs_batch_seq wo_tile_dlhs_embed_dim
wo_tile_dlhs_mlp_dim wo_tile_drhs_batch_seq wo_tile_drhs_embed_dim wo_tile_drhs_mlp_dim wo_tile_fwd_batch_seq
wo_tile_fwd_embed_dim wo_tile_fwd_mlp_dim write_estimator_result wsd_decay_steps_fraction wsd_decay_style
xprof_e2e_enable_fw_power_level_event xprof_e2e_enable_fw_thermal_event xprof_e2e_enable_fw_throttle_event
xprof_tpu_power_trace_level z_loss_multiplier
""".split())
"""The keys MaxText 0.2.5 takes: the fields of configs/types.py MaxTextConfig (:3678) and of the models nested in
them, as pyconfig.py:239-251 _check_for_invalid_keys walks them (base.yml's 786 keys are among them; the rest are
fields MaxText derives or that base.yml leaves unset, e.g. num_decoder_layers, emb_dim).  Read from the 0.2.5 wheel's
source (parsed, never imported)."""


def unknown_keys(keys: dict[str, tuple[object, str]], ignored: list[str]) -> None:
    """A key MaxText 0.2.5 does not define: its pyconfig stops the run before training (UNKNOWN_KEY_CHECK).  A near
    miss of a key it defines is a sure typo, refused naming the key meant; any other may be a newer MaxText's (main
    of 2026-08 has keys 0.2.5 lacks, `enable_nnx`), so it is an `ignored` line, priced without it."""
    for key, (value, ev) in keys.items():
        if key in KNOWN_KEYS:
            continue
        near = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.8)
        if near:
            raise maxtext.refused(ev, f"{key} {value!r} is no MaxText 0.2.5 key", UNKNOWN_KEY_CHECK,
                                  f"did you mean {near[0]}? Rename the key to {near[0]}")
        ignored.append(f"{key} {value!r}: no MaxText 0.2.5 key ({ev}); MaxText 0.2.5 refuses it ({UNKNOWN_KEY_CHECK}), "
                       f"a newer MaxText may define it: priced without it")


def read_file(path: Path, kind: str, s: Settings) -> Settings:
    """A MaxText config (its keys), a launch script (the train command's key=value overrides, which win), or
    jax_mesh.py (the process order, and the GPU order of each host: `mesh_devices`)."""
    if kind == "yaml":
        s.keys = maxtext.yaml_keys(path)
        return s
    if kind == "python":
        script = maxtext.mesh_script(path)
        s.put("hosts", script.hosts, script.hosts_evidence)
        if script.visible_evidence is not None:
            s.put("cuda_visible_devices", mesh_devices(script), script.visible_evidence)
        return s
    if kind != "script":
        raise InputError(f"{path}: a {kind} file is not MaxText launch material (its config YAML, a launch script "
                         f"or jax_mesh.py)")
    found = [(k, c) for k, c in ((maxtext.command_keys(list(c.words)), c) for c in read_commands(path))
             if k is not None]
    if not found:
        raise InputError(f"{path}: no MaxText train command (python3 -m maxtext.trainers.pre_train.train CONFIG "
                         f"key=value ...); expected a MaxText launch script")
    (keys, config), command = found[0]
    s.env_keys = {name[2:].lower(): (word.text, word.evidence) for name, word in command.environment
                  if name.startswith("M_") and name[2:].lower() in KNOWN_KEYS}
    nccl_settings(command, s)
    runtime_settings(command, s)
    jax_memory_settings(command, s)
    s.keys = keys
    s.override = True
    if config:
        s.config_file = (config, "")
    return s


JAX_FRACTION_READ = ("jaxlib 0.10.2 xla_client.py generate_pjrt_gpu_plugin_options: XLA_CLIENT_MEM_FRACTION, else "
                     "the deprecated XLA_PYTHON_CLIENT_MEM_FRACTION; both set raises ValueError")
"""How JAX reads its pool's fraction of the GPU (MaxText 0.2.5 needs jax>=0.11.1, which reads it so)."""


JAX_ALLOCATORS = ("default", "platform", "bfc", "cuda_async", "vmm")
"""The XLA_PYTHON_CLIENT_ALLOCATOR values JAX starts with, lower-cased (JAX_ALLOCATOR_READ)."""
JAX_ALLOCATOR_READ = ("jaxlib 0.10.2 xla_client.py:179, :194-198 generate_pjrt_gpu_plugin_options: "
                      "os.getenv('XLA_PYTHON_CLIENT_ALLOCATOR', 'default').lower(), any other value raises "
                      "'XLA_PYTHON_CLIENT_ALLOCATOR env var must be \"default\", \"platform\", \"bfc\", "
                      "\"cuda_async\", or \"vmm\"'")


def jax_memory_settings(command: Command, s: Settings) -> None:
    """The JAX pool settings MaxText's train command runs with (audit.core.jax_memory_pool prices them): the memory
    fraction as written ("" where the line sets neither name) and XLA_PYTHON_CLIENT_ALLOCATOR.  Both names set stops
    JAX at its first GPU use (JAX_FRACTION_READ): an error, not a price."""
    new, old = command.env("XLA_CLIENT_MEM_FRACTION"), command.env("XLA_PYTHON_CLIENT_MEM_FRACTION")
    if new is not None and old is not None:
        raise InputError(f"XLA_CLIENT_MEM_FRACTION ({new.evidence}) and XLA_PYTHON_CLIENT_MEM_FRACTION "
                         f"({old.evidence}) are both set where the MaxText job starts: JAX refuses the pair "
                         f"({JAX_FRACTION_READ}: 'Remove the latter one, it is deprecated'), so the job does not "
                         f"start; keep XLA_CLIENT_MEM_FRACTION alone")
    word, name = (new, "XLA_CLIENT_MEM_FRACTION") if new is not None else (old, "XLA_PYTHON_CLIENT_MEM_FRACTION")
    if word is None:
        s.put("jax_memory_fraction", "", f"{command.words[0].evidence}: no XLA_CLIENT_MEM_FRACTION or "
                                         f"XLA_PYTHON_CLIENT_MEM_FRACTION")
    else:  # a value the files leave to the environment keeps its text (`${FRACTION}`): unknown, not unset
        s.put("jax_memory_fraction", word.text.strip(), f"{name}={word.text} ({word.evidence})")
    allocator = command.env("XLA_PYTHON_CLIENT_ALLOCATOR")
    if allocator is not None and "$" not in allocator.text and allocator.text.lower() not in JAX_ALLOCATORS:
        # a QA trial: TensorFlow's spelling (TF_GPU_ALLOCATOR=cuda_malloc_async) was priced as a job that runs
        raise InputError(f"XLA_PYTHON_CLIENT_ALLOCATOR={allocator.text} ({allocator.evidence}): JAX raises "
                         f"ValueError at its first GPU use for any allocator but {', '.join(JAX_ALLOCATORS)} "
                         f"({JAX_ALLOCATOR_READ}), so the job does not start; set one of them (cuda_async for CUDA's "
                         f"stream-ordered allocator) or leave it unset for the default")
    if allocator is not None:
        s.put("jax_allocator", allocator.text.strip().lower(),
              f"XLA_PYTHON_CLIENT_ALLOCATOR={allocator.text} ({allocator.evidence})")


def mesh_devices(script: maxtext.MeshScript) -> tuple[NodeDevices, ...]:
    """The GPU order each process of a jax_mesh.py runs on: process k (node rank k) runs on HOSTS[k] with that host's
    CUDA_VISIBLE_DEVICES entry, which initialize() exports before jax.distributed.initialize (JAX numbers a
    process's GPUs in the listed order); a host without an entry runs its GPUs in numbered order.  An entry for a
    host HOSTS does not list is never used."""
    out = []
    for k, host in enumerate(script.hosts):
        if host in script.visible:
            value, ev = script.visible[host]
            out.append(NodeDevices(node_rank=k, devices=device_indices(value, ev), evidence=ev))
        else:
            out.append(NodeDevices(node_rank=k, evidence=f"{script.visible_evidence} (no entry for {host!r}: its "
                                                         f"GPUs in numbered order)"))
    return tuple(out)


def overridden(groups: list[Settings], ignored: list[str]) -> None:
    """Each config YAML's keys that the train command's key=value overrides replace, said per file (a user trial: a
    YAML whose every key the command line set again appeared in no source and no ignored line)."""
    command = {k for g in groups if g.override for k in (g.keys or {})}
    for g in groups:
        if g.override or not g.keys:
            continue
        replaced = [k for k in g.keys if k in command]
        if replaced:
            ignored.append(f"{g.path}: the train command's key=value arguments override its {', '.join(replaced)} "
                           f"({len(replaced)} of its {len(g.keys)} keys)")


def model_layer(groups: list[Settings], ignored: list[str]) -> None:
    """MaxText's order of configs: the command's config (base.yml), then configs/models/<model_name>.yml, then the
    command's key=value (pyconfig.py, AI-Hypercomputer/maxtext e591f30cb: `model_name` taken from base and the
    command line, its model file merged over base before the overrides).  A config YAML named after a `model_name`
    other than "default" is that model file, whose keys replace the other YAMLs' (said per file); without it the
    other YAMLs' model dimensions (maxtext.MODEL_SHAPE_KEYS) are base.yml's defaults the model file replaces, and are
    dropped, --model giving the model (a user trial: MaxText's own Mixtral test, base.yml with model_name=mixtral-8x7b,
    was refused as base.yml's 16 layers, and with mixtral-8x7b.yml beside it as contradictory)."""
    configs = [g for g in groups if not g.override and g.keys]
    said = [g.keys["model_name"] for g in sorted(groups, key=lambda g: g.override) if "model_name" in (g.keys or {})]
    if not said or str(said[-1][0]) == "default":
        return
    name, where = str(said[-1][0]), said[-1][1]
    model = [g for g in configs if Path(g.path).stem == name]
    replaced = set().union(*(g.keys for g in model)) if model else set(maxtext.MODEL_SHAPE_KEYS)
    for g in configs:
        if g in model:
            continue
        dropped = [k for k in g.keys if k in replaced and k != "model_name"]
        if not dropped:
            continue
        g.keys = {k: v for k, v in g.keys.items() if k not in dropped}
        by = (f"{model[0].path}, the model file model_name {name} ({where}) loads" if model else
              f"configs/models/{name}.yml, which model_name {name} ({where}) loads and the audit was not given, so "
              f"--model gives them")
        ignored.append(f"{g.path}: its {', '.join(dropped)} are replaced by {by} (MaxText merges the config, then the "
                       f"model file, then the command's key=value: pyconfig.py)")


def base_layer(groups: list[Settings], ignored: list[str]) -> None:
    """A config's `base_config` given among the files (configs/gpu/models/llama3_8b.yml's "base.yml" beside base.yml):
    MaxText loads the base and lays the config over it (pyconfig.py `_load_config`, following base_config down a
    chain), so a config's keys replace those of every base below it, said per file (a QA run: the two files' run_name
    was refused as contradictory).  The base is the given YAML of that file name."""
    configs = [g for g in groups if not g.override and g.keys]
    parent: dict[int, Settings] = {}
    for child in configs:
        base = child.keys.get("base_config")
        match = [g for g in configs if g is not child and base is not None
                 and Path(g.path).name == Path(str(base[0])).name]
        if match:
            parent[id(child)] = match[0]
    for child in configs:
        stated, where = dict(child.keys), child.keys.get("base_config", ("", ""))[1]
        below, seen = parent.get(id(child)), set()
        while below is not None and id(below) not in seen:
            seen.add(id(below))
            replaced = [k for k in below.keys if k in stated]
            if replaced:
                below.keys = {k: v for k, v in below.keys.items() if k not in replaced}
                ignored.append(f"{below.path}: its {', '.join(replaced)} are replaced by {child.path}, which lays "
                               f"itself over it ({where}: MaxText loads the base_config, then the config: pyconfig.py)")
            below = parent.get(id(below))


ENV_READ = "pyconfig.py:519-553 (AI-Hypercomputer/maxtext e591f30cb)"
"""Where MaxText lays each M_<KEY> environment variable over its merged config."""


def env_overrides(keys: dict[str, tuple[object, str]], env: dict[str, tuple[str, str]],
                  cli: dict[str, str]) -> dict[str, tuple[object, str]]:
    """The merged keys with the M_<KEY> environment variables of the train command laid over them, as MaxText's
    pyconfig does after its config, model file and command line (ENV_READ): each parsed by the type of the value it
    replaces (str2bool for a boolean, int, float or the text; base.yml's default where the files leave the key out),
    and refused where the command line sets the key too, where the text does not parse, or where the value it
    replaces is null (MaxText raises at start-up).  A QA run: `export M_PER_DEVICE_BATCH_SIZE=4` beside a config
    priced at base.yml's per_device_batch_size 12 (global batch 96, 5.747 s) where the job trains at 4."""
    out = dict(keys)
    for key, (text, ev) in env.items():
        name = f"M_{key.upper()}"
        if key in cli:
            raise InputError(f"{name}={text} ({ev}) and the command's {key} ({cli[key]}) both set {key}: MaxText "
                             f"raises \"Key '{key}' is overridden by both CLI/kwargs and environment variable "
                             f"'{name}'\" ({ENV_READ}), so this job does not start; keep one of them")
        if key in out:
            old, old_ev = out[key]
        elif key in maxtext.BASE:
            old, old_ev = maxtext.BASE[key], f"{maxtext.BASE_SOURCE} {key}: {maxtext.BASE[key]}"
        elif maxtext.FIELD_TYPES.get(key) in (bool, int, float):  # base.yml's value, of the field's type
            kind = maxtext.FIELD_TYPES[key]
            old, old_ev = kind(), f"base.yml's {key}, a {kind.__name__} (configs/types.py)"
        else:  # a key placement does not price, whose base.yml type it does not hold
            old, old_ev = None, None
        if "$" in text:  # left to the environment the job starts in: its value is not in the files
            if old_ev is not None:
                out[key] = (old, f"{old_ev}; but {name}={text} ({ev}) replaces it with a value of the job's "
                                 f"environment, which the files do not hold: priced at this one ({ENV_READ})")
            continue
        if old_ev is None:
            out[key] = (maxtext.pyconfig_value(text), f"{name}={text} ({ev}: MaxText's environment override, "
                                                      f"{ENV_READ})")
            continue
        value: object
        try:
            if isinstance(old, bool):
                word = text.lower()
                if word not in ("y", "yes", "t", "true", "1", "n", "no", "f", "false", "0"):
                    raise ValueError(text)
                value = word in ("y", "yes", "t", "true", "1")  # inference/inference_utils.py str2bool
            elif isinstance(old, (int, float, str)):
                value = type(old)(text)
            else:
                raise InputError(f"{name}={text} ({ev}): {key} is {old!r} before it ({old_ev}), and MaxText raises "
                                 f"\"Type {type(old)} for key '{key}' not supported for ENV override\" ({ENV_READ}), "
                                 f"so this job does not start; set {key} in the config or on the command line")
        except ValueError:
            raise InputError(f"{name}={text} ({ev}): MaxText parses it as {type(old).__name__}, like the value it "
                             f"replaces ({old_ev}), and raises \"Couldn't parse value from ENV '{text}' for key "
                             f"'{key}'\" ({ENV_READ}), so this job does not start; write it as a "
                             f"{type(old).__name__}") from None
        out[key] = (maxtext.pyconfig_value(value), f"{name}={text} ({ev}: MaxText's environment override over "
                                                   f"{old_ev}, {ENV_READ})")
    return out


def join(groups: list[Settings], paths: list[Path]) -> Reading:
    """A MaxText job: the files' keys merged (a config over the base_config it names, the model file over the config,
    command-line overrides over all: `base_layer`, `model_layer`), read by `placement.audit.maxtext`."""
    notes: list[str] = []
    base_layer(groups, notes)
    model_layer(groups, notes)
    env = {k: v for g in groups for k, v in g.env_keys.items()}
    cli = {k: ev for g in groups if g.override for k, (_, ev) in (g.keys or {}).items()}
    s = merge(groups)
    s.ignored += notes
    if env:
        s.keys = env_overrides(s.keys or {}, env, cli)
    config = s.config_file
    yamls = [Path(p) for p in paths if Path(p).suffix.lower() in (".yaml", ".yml")]
    named = Path(config[0]).name if config is not None else None
    if config is not None and not yamls and named != "base.yml":
        raise InputError(f"the MaxText command trains with config {config[0]}, which is not among the audited "
                         f"files; pass it too (--launch {config[0]}): without it the audit would price base.yml "
                         f"defaults for every key the command line leaves out")
    if config is not None and yamls and named != "base.yml" and named not in {y.name for y in yamls}:
        # a user trial: another model's YAML given beside a script that loads llama3.1_405b.yml was merged in silently
        raise InputError(f"the MaxText command trains with config {config[0]}, but the YAML given is "
                         f"{', '.join(str(y) for y in yamls)}, which that command does not load (another file name): "
                         f"its keys would be priced for a job that never reads them; pass the command's own config "
                         f"(--launch with a file named {named}), or drop the other YAML")
    overridden(groups, s.ignored)
    unknown_keys(s.keys or {}, s.ignored)
    s.maxtext_keys = {k: ev for k, (_, ev) in (s.keys or {}).items()}
    for name, (value, ev) in maxtext.finish(s.keys or {}, s.ignored).items():
        s.put(name, value, ev)
    return s.reading("maxtext")
