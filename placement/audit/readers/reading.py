"""What the readers hand the audit: `Reading`, a typed record of the layout, the job and the recipe the launch
files state with the evidence of each, and `LaunchLayout`, the validated model the audit core reads.

Each reader fills one `Settings` per file (typed values, None where the file says nothing); a framework's
join step merges them with conflict checks, applies that framework's rules (defaults, derived fields), and
returns a frozen `Reading`; `Reading.launch_layout()` validates it into the `LaunchLayout`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from placement.audit.shell import HereDoc, Word
from placement.errors import InputError
from placement.specs._base import Frozen

Framework = Literal["megatron", "torchtitan", "deepspeed", "maxtext"]


class UnknownKey(Frozen):
    """A key of a config file or command line that no version of its framework takes (GPT-NeoX: readers.neox_keys,
    torchtitan: readers.torchtitan_keys, Megatron-LM: readers.megatron_flags), where it is no sure typo of one it takes
    (that is an error)."""

    key: str
    """As the file spells it."""
    file: str
    line: int | None = None
    """1-based, None where the key is not found on a line of its own (a flow mapping on one line)."""
    suggestion: str | None = None
    """The nearest key the framework takes (difflib), if any is near."""
    megatron: bool = False
    """A flag of a Megatron-LM (or Megatron-DeepSpeed) argument list (readers.megatron_flags), whatever framework the
    launch is audited as."""
    deepspeed: bool = False
    """A key of a DeepSpeed JSON config no DeepSpeed version reads (readers.deepspeed_keys): a top-level one DeepSpeed
    ignores; a `zero_optimization.` one DeepSpeed refuses since v0.7.0 (DeepSpeedZeroConfig, extra="forbid")."""


class NodeDevices(Frozen):
    """The CUDA_VISIBLE_DEVICES one launch line that starts a node's ranks runs with (torchrun keeps the list and
    LOCAL_RANK indexes it: local rank i runs on GPU devices[i])."""

    node_rank: int | None = None
    """The line's --node-rank / --node_rank where the files fix it; None: every node runs this line."""
    devices: tuple[int, ...] | None = None
    """The GPU indices in the order listed; None where the line runs with no CUDA_VISIBLE_DEVICES (GPUs 0, 1, ...)."""
    evidence: str
    """Where the value was set (an `export` or the line's own `NAME=value`), else the launch line."""
    unresolved: str | None = None
    """Where the line sets the variable to a value the files leave open (read from a file at run time, say): what it
    depends on; `devices` is then None and the GPUs are priced in numbered order unless a file given to the audit
    lists them (`LaunchLayout.devices_by_host`)."""

    def __str__(self) -> str:
        return "in numbered order (none set)" if self.devices is None else ",".join(map(str, self.devices))

    def shown(self) -> str:
        """The line for a message: which nodes, the order it states (or what its value is read from), where."""
        nodes = "every node" if self.node_rank is None else f"node rank {self.node_rank}"
        order = self if self.unresolved is None else f"read at run time ({self.unresolved})"
        return f"{nodes}: {order} ({self.evidence})"


def node_line(lines: Sequence[NodeDevices]) -> Callable[[int | None], NodeDevices | None]:
    """The launch line that starts each node rank's ranks: the one naming that rank (the last, where several do),
    else the first whose node rank the files leave open (None asks for that one alone)."""
    ranked = {n.node_rank: n for n in lines if n.node_rank is not None}
    anywhere = next((n for n in lines if n.node_rank is None), None)
    return lambda rank: ranked.get(rank, anywhere) if rank is not None else anywhere


class LaunchLayout(Frozen):
    """The layout a job's launch files state.  Fields without an entry in `sources` are defaults."""

    framework: Framework
    dialect: Literal["gpt-neox", "hf-trainer"] | None = None
    """The files' own spelling where it is not the framework's: "gpt-neox" for a GPT-NeoX config, whose keys the
    argument diff then speaks; "hf-trainer" for a HuggingFace Trainer script run under DeepSpeed, whose
    TrainingArguments flags fill and must match the DeepSpeed JSON (changes.hf_trainer_changes)."""
    tp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    etp: int | None = Field(default=None, ge=1)
    """Expert-tensor degree if given (Megatron --expert-tensor-parallel-size; None = framework default)."""
    pp: int = Field(default=1, ge=1)
    vpp: int = Field(default=1, ge=1)
    """Model chunks per pipeline rank; see `layers_per_virtual_stage` when it depends on the layer count."""
    dp: int | None = Field(default=None, ge=1)
    """Only if the files state it (torchtitan data_parallel_replicate * shard when both explicit)."""
    dp_shard: int | None = Field(default=None, ge=1)
    """torchtitan data_parallel_shard_degree (None for -1 = "the rest")."""
    dp_replicate: int = Field(default=1, ge=1)
    micro_batch_size: int | None = Field(default=None, ge=1)
    global_batch: int | None = Field(default=None, ge=1)
    grad_accumulation: int | None = Field(default=None, ge=1)
    """Gradient-accumulation steps the files fix (DeepSpeed / GPT-NeoX gradient_accumulation_steps; DeepSpeed's
    default 1 when they give a micro-batch and no train_batch_size): global batch = micro x this x dp."""
    local_batch: int | None = Field(default=None, ge=1)
    """torchtitan training.local_batch_size: sequences per data-parallel rank per step (global = this x dp
    when training.global_batch_size is not set)."""
    seq_len: int | None = Field(default=None, ge=1)
    zero_stage: int | None = Field(default=None, ge=0, le=3)
    recompute: Literal["none", "selective", "full"] | None = None
    sequence_parallel: bool | None = None
    first_stage_layers: int | None = Field(default=None, ge=0)
    """Transformer layers on the first pipeline rank (all its virtual stages), if the files fix it."""
    last_stage_layers: int | None = Field(default=None, ge=0)
    num_layers: int | None = Field(default=None, ge=1)
    hidden_size: int | None = Field(default=None, ge=1)
    num_attention_heads: int | None = Field(default=None, ge=1)
    num_experts: int | None = Field(default=None, ge=1)
    ffn_hidden_size: int | None = Field(default=None, ge=1)
    num_query_groups: int | None = Field(default=None, ge=1)
    """Megatron --num-query-groups under --group-query-attention: the model's KV heads."""
    moe_router_topk: int | None = Field(default=None, ge=1)
    num_moe_layers: int | None = Field(default=None, ge=0)
    """The MoE layers the files build, where they decide it (Megatron-DeepSpeed: num_layers // --expert-interval,
    default 2): compared with --model's (audit.core._model_shape)."""
    moe_ffn_hidden_size: int | None = Field(default=None, ge=1)
    kv_channels: int | None = Field(default=None, ge=1)
    """Megatron --kv-channels: the head dimension."""
    rope_base: float | None = Field(default=None, gt=0)
    """Megatron --rotary-base (the numerics, not the cost)."""
    rope_scaling_factor: float | None = Field(default=None, gt=0)
    """Megatron --use-rope-scaling's --rope-scaling-factor (Llama 3.x RoPE scaling; the numerics, not the cost);
    None: the files turn no RoPE scaling on."""
    activation: Literal["swiglu", "quick_geglu", "squared_relu", "gelu"] | None = None
    """Megatron --swiglu / --quick-geglu / --squared-relu (ModelSpec ffn_kind), or "gelu", Megatron's MLP without a
    switch, where the files state the model (--hidden-size); None: the files state none."""
    glu_linear_offset: float | None = None
    """Megatron --glu-linear-offset (the numerics, not the cost)."""
    activation_clamp: float | None = Field(default=None, gt=0)
    """Megatron --activation-func-clamp-value (ModelSpec swiglu_clamp; the numerics, not the cost)."""
    softmax_type: Literal["vanilla", "off-by-one", "learnable"] | None = None
    """Megatron --softmax-type (learnable: ModelSpec attention_sinks; the numerics, not the cost)."""
    sliding_window_layers: int | None = Field(default=None, ge=0)
    """The layers a Megatron-LM launch that states its model builds with sliding-window attention: --window-size with
    --window-attn-skip-freq as Megatron-Core counts them (transformer/utils.py is_layer_window_attention), 0 without
    --window-size (compared with --model's: audit.core._model_shape)."""
    sliding_window: int | None = Field(default=None, ge=1)
    """That window in HF's tokens (the query's own included): Megatron's --window-size left + 1."""
    position_embedding: str | None = None
    """Megatron --position-embedding-type as the files spell it (learned_absolute, rope, yarn, mrope, none; alibi in
    BigScience's Megatron-DeepSpeed): compared with the model's (audit.core.model_differs)."""
    yarn_factor: float | None = Field(default=None, gt=0)
    """Megatron --rotary-scaling-factor (YaRN; the numerics, not the cost)."""
    yarn_original_max_positions: float | None = Field(default=None, gt=0)
    """Megatron --yarn-original-max-position-embeddings."""
    yarn_beta_fast: float | None = Field(default=None, gt=0)
    """Megatron --yarn-beta-fast."""
    yarn_beta_slow: float | None = Field(default=None, gt=0)
    """Megatron --yarn-beta-slow."""
    yarn_truncate: bool | None = None
    """Megatron --[no-]yarn-correction-range-round-to-int."""
    parallel_residual: bool | None = None
    """GPT-NeoX `gpt_j_residual`: attention and MLP outputs summed before one TP all-reduce (ModelSpec field)."""
    precision: Literal["bf16", "fp8"] | None = None
    """fp8 if the files turn on FP8 GEMMs."""
    world_size: int | None = Field(default=None, ge=1)
    """From the launcher in the files (torchrun nnodes x nproc-per-node, hostfile slots...)."""
    gpus_per_node: int | None = Field(default=None, ge=1)
    launcher_node_range: str | None = None
    """torchrun's elastic --nnodes MIN:MAX where no srun fixes the nodes it runs on: the audit's node count (the
    allocation's, --gpus/--nodes) must lie in it (cli._check_elastic_range)."""
    launcher_nodes: int | None = Field(default=None, ge=1)
    """The nodes the launcher counts where the files leave the processes per node to the node: torchrun's --nnodes
    with --nproc-per-node gpu or auto (one process per GPU each node shows: torch.cuda.device_count(),
    torch/distributed/run.py determine_local_world_size), or deepspeed's --num_nodes without --num_gpus and without
    its hostfile among the files (assumed each node's GPUs): the audit's node count where no flag gives one."""
    job_nodelist: str | None = None
    """The hosts the batch script's `#SBATCH --nodelist` (`-w`) asks for, as written, where they are the job's whole
    node list (no node count asks for more): the allocation's hosts where --nodelist gives none, and compared with
    it where it does."""
    task_distribution: str | None = Field(default=None, pattern=r"^(block|cyclic|plane=[1-9][0-9]*)$")
    """How srun deals the tasks of an `srun python ...` launch (one rank per task) to the job's nodes: its
    -m/--distribution (or SLURM_DISTRIBUTION), `block` (srun's default: consecutive ranks share a node), `cyclic`
    (rank r on node r mod N) or `plane=P` (P consecutive ranks a node, round robin; srun(1) -m).  None where the
    files state none: block.  An `mpirun ... python` launch's `--map-by node` (`--bynode`, `--rank-by node`) is
    `cyclic` too (task_dealer mpirun)."""
    task_dealer: Literal["srun", "mpirun"] | None = None
    """The launcher whose flag sets task_distribution, and whose flag a change of it names: srun's --distribution,
    or mpirun's --map-by; None (srun) where none does."""
    slurm_node_order: bool | None = None
    """The node ranks follow SLURM's numbering of the job's nodes (SLURM_NODEID, which runs over the nodes in SLURM's
    host order, hostlist_sort: node2 before node10): torchrun's --node-rank $SLURM_NODEID (or $SLURM_PROCID, one task
    a node) under srun, or srun's own tasks as ranks (`srun python ...`); its evidence in sources."""
    tasks_per_node: int | None = Field(default=None, ge=2)
    """srun's tasks per node where more than one each run torchrun (`#SBATCH --ntasks-per-node=8` with `srun torchrun
    --nproc_per_node 8`): gpus_per_node counts every task's processes, and the fix for more than the GPUs is one task
    per node."""
    hosts: tuple[str, ...] = ()
    """Host order the files fix (DeepSpeed hostfile lines, MaxText's jax_mesh.py, the `# on HOST` comment above each
    node rank's launch line of placement's scripts)."""
    devices_by_host: dict[str, NodeDevices] = Field(default_factory=dict)
    """Added: the CUDA_VISIBLE_DEVICES of each host from a file given to the audit that lists them per host name
    (placement's cuda_visible_devices.txt, which its launch.sbatch reads at run time); the audit gives each node rank
    its host's once it knows the host order."""
    cuda_visible_devices: tuple[NodeDevices, ...] = ()
    """Added: each launch line that starts a node's ranks with the CUDA_VISIBLE_DEVICES it runs with (none: the
    files have no launch line; a line without the variable: its GPUs in numbered order).  Evidence under
    sources["cuda_visible_devices"] where some line sets it."""
    vocab_size: int | None = Field(default=None, ge=1)
    """Megatron --vocab-size where the tokenizer builds the model at it (--tokenizer-type NullTokenizer, the mock-data
    benchmarks'); other tokenizers take the vocabulary from files the audit does not see."""
    device_max_connections: str | None = None
    """CUDA_DEVICE_MAX_CONNECTIONS as the launch line runs with it (None: the files do not set it), which Megatron-LM
    checks at start (audit.core._check_megatron_connections)."""
    allocator_conf: str | None = None
    """PyTorch's allocator settings the launch line runs with (PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF): ""
    for a launch line without either, None where the files have no launch line (audit.core._allocator_note)."""
    jax_memory_fraction: str | None = None
    """A MaxText launch line's JAX memory fraction (XLA_CLIENT_MEM_FRACTION, or the older name
    XLA_PYTHON_CLIENT_MEM_FRACTION) as written: "" for a launch line without either, None where the files have no
    launch line (audit.core.jax_memory_pool)."""
    jax_allocator: str | None = None
    """A MaxText launch line's XLA_PYTHON_CLIENT_ALLOCATOR as written (None: not set; `platform` keeps no pool)."""
    moe_layer_freq: str | None = None
    """Megatron-LM --moe-layer-freq as the files give it (an integer N, every N-th layer MoE, or a list expression);
    readers.megatron.model_defaults counts its MoE layers into num_moe_layers."""
    moe_shared_expert_intermediate_size: int | None = Field(default=None, ge=0)
    """Megatron-LM --moe-shared-expert-intermediate-size: the shared experts' total width (0: none, Megatron-LM's
    default for an MoE launch without it; None: not read)."""
    multi_latent_attention: bool | None = None
    """Megatron-LM --multi-latent-attention: the attention is MLA (its ranks and head widths below); False for a
    Megatron-LM launch without it (None: not read)."""
    q_lora_rank: int | None = Field(default=None, ge=1)
    kv_lora_rank: int | None = Field(default=None, ge=1)
    qk_head_dim: int | None = Field(default=None, ge=1)
    qk_pos_emb_head_dim: int | None = Field(default=None, ge=1)
    v_head_dim: int | None = Field(default=None, ge=1)
    """MLA's query and KV compression ranks and head widths (--q-lora-rank, --kv-lora-rank, --qk-head-dim,
    --qk-pos-emb-head-dim, --v-head-dim), compared with --model's where the files run MLA."""
    launch_environment: tuple[str, ...] = ()
    """The runtime variables the launch line runs with that no priced field reads (`NAME=value`: NCCL_*, NVTE_*,
    TORCH_*, ... of shell.WATCHED_PREFIXES, not CUDA_DEVICE_MAX_CONNECTIONS or the allocator's), by name:
    the best plan's files for the job (audit --out) do not set them and say so (EmitContext.job_environment)."""
    model_ref: str | None = None
    """torchtitan model name:flavor (0.2.x) or module:config (0.3.0), e.g. "llama3:405B"."""
    layers_per_virtual_stage: int | None = Field(default=None, ge=1)
    """Added: layers per (virtual) pipeline stage when the files give that instead of a stage count
    (Megatron --num-layers-per-virtual-pipeline-stage without --num-layers, torchtitan
    pipeline_parallel_layers_per_stage); `virtual_stages(num_layers)` turns it into vpp."""
    mesh: dict[str, Any] | None = None
    """MaxText: the mesh and batch keys as read (axes, ici, dcn with -1 fills left for the cluster,
    per_device_batch_size, accumulation, pipeline keys, the source of each); `placement.audit.maxtext.resolve`
    turns them into the layout on the job's GPUs."""
    rank_order: Literal["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"] = "tp-cp-ep-dp-pp"
    """Megatron's rank order (--use-tp-pp-dp-mapping puts pp inside dp); torchtitan's and DeepSpeed's
    meshes are the default one."""
    first_stage_less_layers: int = Field(default=1, ge=0)
    """torchtitan pipeline_parallel_first_stage_less_layers: the embedding's weight in the stage split."""
    last_stage_less_layers: int = Field(default=1, ge=0)
    """torchtitan pipeline_parallel_last_stage_less_layers: the output layer's weight in the stage split."""
    recipe: dict[str, Any] = Field(default_factory=dict)
    """Recipe fields (placement/specs/recipe.py) the files state: Megatron's recipe arguments, read as
    `placement.emit.megatron` writes them; evidence under sources["recipe.FIELD"]."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Field -> "file:line: original text", the evidence for each value read from the files."""
    ignored: tuple[str, ...] = ()
    """Settings seen that affect performance but are not modelled."""
    refusal: str | None = None
    """Why the framework would not start this job, or would train it otherwise than placement prices it (fp32,
    no model arguments): `audit` and `calibrate` refuse the files with it (audit.launch.refuse_unrunnable); a reader
    keeps it rather than raising, so its parts stay readable on their own."""
    pipeline_module: str | None = None
    """Evidence that a Megatron-DeepSpeed job builds its model as a PipelineModule (--deepspeed without
    --no-pipeline-parallel): a best plan under ZeRO-2/3 must add --no-pipeline-parallel."""
    micro_batch_one: str | None = None
    """Why the job's framework runs micro-batch 1 only (Megatron-Bridge with packed sequences: training/config.py
    refuses a larger one): the best plan keeps it."""
    offloaded: tuple[str, ...] = ()
    """ZeRO's offloads the files turn on (`offload_optimizer`, `offload_param`): the state they move lives in host
    memory, which the estimate's GPU memory does not subtract (audit's memory finding does)."""
    megatron_deepspeed: bool = False
    """Megatron's arguments under --deepspeed (Megatron-DeepSpeed), whichever framework the audit reads the job as:
    its remedies are Megatron-DeepSpeed's flags."""
    deepspeed_moe: str | None = None
    """Evidence that the files build DeepSpeed's own MoE layers (a Python file's `ep_size = ...` or `MoE(...)`,
    whatever the degree), which DeepSpeed refuses under ZeRO-3."""
    deepspeed_json: str | None = None
    """The one DeepSpeed JSON the files gave (its path as given): `audit --out` of a job that runs its own program
    writes it back with the change list's keys applied (audit.report.write_own_program_files)."""
    deepspeed_json_written: str | None = None
    """Where the launch script writes the DeepSpeed JSON it passes with a here-document (the command's line), which
    the audit read as that JSON: the script writes it at each run, so `audit --out` writes none back."""
    neox_configs: tuple[str, ...] = ()
    """A GPT-NeoX job's config files (paths as given), which `audit --out` writes back with the change list's keys."""
    context_axis: bool = False
    """cp is a DeepSpeed ProcessTopology's 'context' axis (placement's ds_topology.py): ring attention of the model
    code's, with ZeRO over the 'data' ranks alone (not DeepSpeed-Ulysses, whose ZeRO spans sequence x data)."""
    command_args: tuple[tuple[str, str | None], ...] = ()
    """The Megatron-LM flags of the training command the files run, in order (`_` read as `-`), each with its values
    where the files fix them (several space-separated, `attn mlp`; else None): what the megatron.sh written for the
    best plan is checked against (audit.changes.megatron_flags_not_carried), and how a change names the launched side.
    Only the command as the shell runs it: not a profiler's options on the same line, not an `if` branch the script
    does not take."""
    warnings: tuple[str, ...] = ()
    """What the files run that the estimate does not describe (adapter training priced as a full fine-tune, a config
    the job does not read): each is a warning finding, `not_priced_as_run`, over the whole estimate."""
    config_keys: dict[str, str] = Field(default_factory=dict)
    """GPT-NeoX: every top-level key the config files state (a `-` read as `_`, as GPT-NeoX reads it) and
    zero_optimization.stage, each with its value as the change list spells it (true / false, numbers as written, a
    mapping or a list elided as {...} / [...]): the change list's launched side and the config's GPT-NeoX version
    (readers.neox.version_window).  HF Trainer: the DeepSpeed JSON's keys, flattened (`zero_optimization.stage`),
    each with its value ("auto" where the Trainer fills it)."""
    unknown_keys: tuple[UnknownKey, ...] = ()
    """Keys the files state that no version of the framework takes (GPT-NeoX, torchtitan), priced without them."""
    config_spelling: dict[str, str] = Field(default_factory=dict)
    """GPT-NeoX: each key of config_keys as the files spell it (`checkpoint-activations`), and "-" where the files
    spell their keys with dashes: the change list names keys that way (GPT-NeoX reads both spellings, and a key
    written both ways is not refused, so an added line in the other spelling may not be the one it takes)."""
    torchtitan_form: Literal["toml", "flags"] | None = None
    """torchtitan before 0.3.0: "toml" where a TOML file states the job (0.2.x flags may override its keys), "flags"
    where 0.2.x flags alone do; the change list names its settings in that version's keys, that way
    (changes.torchtitan_pre3_settings).  None: 0.3.0's flags, whose change list is placement's own flags."""
    bridge_keys: dict[str, str] = Field(default_factory=dict)
    """Megatron-Bridge: every `section.key` a ConfigContainer YAML (or a Hydra override) states, with its value as
    the YAML writes it (true / false / null, numbers, a list as [a, b]): the change list names its settings in these
    keys (changes.bridge_changes), not Megatron-LM's flags."""
    base_config: str | None = None
    """Where the files only override a base configuration the audit cannot read (a Megatron-Bridge override YAML or
    Hydra overrides, merged onto a recipe built in Python): what the base is, with the evidence.  The fields they leave
    out are the base's, priced at the framework's defaults (the warning finding base_config_unread says which)."""
    torchtitan_stated: dict[str, tuple[str, str]] = Field(default_factory=dict)
    """torchtitan before 0.3.0: each key the files state (a flag's over the TOML's, as torchtitan merges them) ->
    (its value as the change list writes it: a TOML value where a TOML file states the key, the flag's text else;
    how the files state it: "toml", or the flag as written): the change list's launched side and the keys that date
    the torchtitan that runs the files (readers.torchtitan.version_window)."""
    maxtext_keys: dict[str, str] = Field(default_factory=dict)
    """MaxText: each key of the merged config -> the evidence of the value the job runs ("file:line: text"), the
    command's key=value over the model file over the config over its base_config (readers.maxtext.join): the change
    list's launched side, whatever order the files were given in."""

    def virtual_stages(self, num_layers: int) -> int:
        """vpp for a model of `num_layers` layers (uses `layers_per_virtual_stage` when the files gave it).

        torchtitan (0.2.2 and 0.3.0 `_get_pipeline_metadata`): stages = ceil((layers + first_less +
        last_less) / layers_per_stage), the embedding and output weighing one layer each by default; per
        rank = stages / pp.  Megatron (0.19.2 validate_args):
        (layers / pp) / layers_per_virtual_stage.
        """
        if self.layers_per_virtual_stage is None or self.pp == 1:
            return self.vpp
        lps = self.layers_per_virtual_stage
        if self.framework == "torchtitan":
            weights = self.first_stage_less_layers + self.last_stage_less_layers
            stages = -(-(num_layers + weights) // lps)
            if stages % self.pp:
                where = self.sources.get("layers_per_virtual_stage")
                raise InputError(
                    f"{where + ': ' if where else ''}pipeline_parallel_layers_per_stage {lps} gives ceil(({num_layers} "
                    f"layers + {weights} for the first/last_stage_less_layers) / {lps}) = {stages} stages, not a "
                    f"multiple of pipeline_parallel_degree {self.pp}: torchtitan stops at start (distributed/"
                    f"pipeline_parallel.py, \"Number of virtual stages ... must be divisible by pipeline parallel "
                    f"size\"), so this job does not run; {_stage_fix(num_layers, weights, lps, self.pp)}")
            return stages // self.pp
        per_stage, rem = divmod(num_layers, self.pp)
        if rem or per_stage % lps:
            where = self.sources.get("layers_per_virtual_stage")
            raise InputError(f"{where + ': ' if where else ''}--num-layers-per-virtual-pipeline-stage {lps} does not "
                             f"divide the {num_layers} layers / pp {self.pp}; Megatron rejects it")
        return per_stage // lps


def _stage_fix(num_layers: int, weights: int, lps: int, pp: int) -> str:
    """The nearest values that give torchtitan a multiple of `pp` stages: layers per stage for two or more stages a
    rank (its multi-stage schedules) and for exactly one (1F1B, GPipe), or first + last_stage_less_layers at the
    file's layers per stage."""
    total = num_layers + weights

    def per_rank(v: int) -> float:
        return -(-total // v) / pp

    multi = sorted((v for v in range(1, total + 1) if per_rank(v).is_integer() and per_rank(v) >= 2),
                   key=lambda v: (abs(v - lps), v))[:2]
    single = sorted((v for v in range(1, total + 1) if per_rank(v) == 1), key=lambda v: (abs(v - lps), v))[:1]
    extra = next((w for w in range(weights + 1, weights + lps * pp + 1) if (-(-(num_layers + w) // lps)) % pp == 0),
                 None)
    fixes = []
    if multi:
        fixes.append(f"pipeline_parallel_layers_per_stage {' or '.join(map(str, sorted(multi)))} (two or more "
                     f"stages a rank, as interleaved schedules need)")
    if single:
        fixes.append(f"{single[0]} (one stage a rank, as 1F1B and GPipe need)")
    if extra is not None:
        fixes.append(f"first_stage_less_layers + last_stage_less_layers = {extra} (now {weights}) at "
                     f"{lps} layers per stage")
    return "try " + ", or ".join(fixes) if fixes else "give a layer split whose stage count pp divides"


@dataclass(frozen=True)
class LayoutRead:
    """The parallel layout the files state; None where they say nothing (LaunchLayout's default then)."""

    tp: int | None = None
    cp: int | None = None
    ep: int | None = None
    etp: int | None = None
    pp: int | None = None
    vpp: int | None = None
    dp: int | None = None
    dp_shard: int | None = None
    dp_replicate: int | None = None
    zero_stage: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    layers_per_virtual_stage: int | None = None
    first_stage_less_layers: int | None = None
    last_stage_less_layers: int | None = None
    rank_order: str | None = None
    mesh: dict[str, Any] | None = None
    """MaxText's mesh as read (`placement.audit.maxtext.finish`)."""
    pp_layout: str | None = None
    """Megatron's --pipeline-model-parallel-layout text; the Megatron join turns it into vpp and the first and
    last stages' layers, so it never reaches the LaunchLayout."""


@dataclass(frozen=True)
class JobRead:
    """The job the files state around the layout: batch, sequence, precision, world, hosts, model."""

    micro_batch_size: int | None = None
    global_batch: int | None = None
    grad_accumulation: int | None = None
    local_batch: int | None = None
    seq_len: int | None = None
    precision: str | None = None
    world_size: int | None = None
    gpus_per_node: int | None = None
    launcher_nodes: int | None = None
    launcher_node_range: str | None = None
    job_nodelist: str | None = None
    tasks_per_node: int | None = None
    task_distribution: str | None = None
    task_dealer: str | None = None
    slurm_node_order: bool | None = None
    hosts: tuple[str, ...] | None = None
    cuda_visible_devices: tuple[NodeDevices, ...] | None = None
    device_max_connections: str | None = None
    allocator_conf: str | None = None
    jax_memory_fraction: str | None = None
    jax_allocator: str | None = None
    launch_environment: tuple[str, ...] | None = None
    moe_layer_freq: str | None = None
    moe_shared_expert_intermediate_size: int | None = None
    multi_latent_attention: bool | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_head_dim: int | None = None
    qk_pos_emb_head_dim: int | None = None
    v_head_dim: int | None = None
    vocab_size: int | None = None
    model_ref: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_experts: int | None = None
    ffn_hidden_size: int | None = None
    num_query_groups: int | None = None
    moe_router_topk: int | None = None
    num_moe_layers: int | None = None
    moe_ffn_hidden_size: int | None = None
    kv_channels: int | None = None
    rope_base: float | None = None
    rope_scaling_factor: float | None = None
    activation: str | None = None
    glu_linear_offset: float | None = None
    activation_clamp: float | None = None
    softmax_type: str | None = None
    window_size_text: str | None = None
    window_skip_text: str | None = None
    sliding_window_layers: int | None = None
    sliding_window: int | None = None
    position_embedding: str | None = None
    yarn_factor: float | None = None
    yarn_original_max_positions: float | None = None
    yarn_beta_fast: float | None = None
    yarn_beta_slow: float | None = None
    yarn_truncate: bool | None = None
    parallel_residual: bool | None = None


_LAYOUT_FIELDS = frozenset(f.name for f in dataclasses.fields(LayoutRead))
_JOB_FIELDS = frozenset(f.name for f in dataclasses.fields(JobRead))


@dataclass(frozen=True)
class Reading:
    """A job's launch files as the readers hand them to the core: typed values (None: not stated), the recipe
    fields stated, and the evidence of each value under its LaunchLayout `sources` key."""

    framework: str
    layout: LayoutRead
    job: JobRead
    recipe: dict[str, Any]
    """Recipe field (placement/specs/recipe.py) -> value."""
    sources: dict[str, str]
    """LaunchLayout field, or "recipe.FIELD" -> "file:line: original text"."""
    ignored: tuple[str, ...]
    dialect: str | None = None
    """"gpt-neox" where a GPT-NeoX config states the job (DeepSpeed runs it in GPT-NeoX's own keys)."""
    config_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.config_keys."""
    unknown_keys: tuple[UnknownKey, ...] = ()
    config_spelling: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.config_spelling."""
    torchtitan_form: str | None = None
    """LaunchLayout.torchtitan_form."""
    torchtitan_stated: dict[str, tuple[str, str]] = field(default_factory=dict)
    """LaunchLayout.torchtitan_stated."""
    bridge_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.bridge_keys."""
    base_config: str | None = None
    """LaunchLayout.base_config."""
    warnings: tuple[str, ...] = ()
    """LaunchLayout.warnings."""
    refusal: str | None = None
    """LaunchLayout.refusal."""
    pipeline_module: str | None = None
    """LaunchLayout.pipeline_module."""
    offloaded: tuple[str, ...] = ()
    """LaunchLayout.offloaded."""
    megatron_deepspeed: bool = False
    """LaunchLayout.megatron_deepspeed."""
    micro_batch_one: str | None = None
    """LaunchLayout.micro_batch_one."""
    command_args: tuple[tuple[str, str | None], ...] = ()
    """LaunchLayout.command_args."""
    context_axis: bool = False
    """LaunchLayout.context_axis."""
    deepspeed_moe: str | None = None
    """LaunchLayout.deepspeed_moe."""
    deepspeed_json: str | None = None
    """LaunchLayout.deepspeed_json."""
    neox_configs: tuple[str, ...] = ()
    """LaunchLayout.neox_configs."""
    maxtext_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.maxtext_keys."""
    deepspeed_json_written: str | None = None
    """LaunchLayout.deepspeed_json_written."""

    def launch_layout(self) -> LaunchLayout:
        """The validated LaunchLayout; an InputError names each value out of range with its evidence."""
        stated = {**dataclasses.asdict(self.layout), **dataclasses.asdict(self.job)}
        # (the window flags' texts are read into sliding_window_layers: readers.megatron.window_layers)
        fields = {k: v for k, v in stated.items()
                  if v is not None and k not in ("pp_layout", "window_size_text", "window_skip_text")}
        try:
            return LaunchLayout(framework=self.framework, recipe=self.recipe, sources=self.sources,
                                ignored=self.ignored, dialect=self.dialect, config_keys=self.config_keys,
                                unknown_keys=self.unknown_keys, config_spelling=self.config_spelling,
                                torchtitan_form=self.torchtitan_form, torchtitan_stated=self.torchtitan_stated,
                                bridge_keys=self.bridge_keys, base_config=self.base_config,
                                warnings=self.warnings, refusal=self.refusal,
                                pipeline_module=self.pipeline_module, offloaded=self.offloaded,
                                megatron_deepspeed=self.megatron_deepspeed, micro_batch_one=self.micro_batch_one,
                                command_args=self.command_args, context_axis=self.context_axis,
                                deepspeed_moe=self.deepspeed_moe, deepspeed_json=self.deepspeed_json,
                                deepspeed_json_written=self.deepspeed_json_written,
                                neox_configs=self.neox_configs, maxtext_keys=self.maxtext_keys,
                                **fields)
        except ValueError as err:  # pydantic ValidationError: a value out of range
            bad = "; ".join(f"{'.'.join(str(x) for x in e['loc'])} = {e.get('input')!r} "
                            f"({self.sources.get(str(e['loc'][0]), '')}): {e['msg']}"
                            for e in err.errors())  # type: ignore[attr-defined]
            raise InputError(f"launch files state an invalid layout: {bad}") from None


@dataclass(frozen=True)
class DeepSpeedBinding:
    """What the deepspeed launch line says about process binding, decided once the host count is known
    (common.deepspeed_binding)."""

    flag: str | None
    """Evidence of --bind_cores_to_rank, or None without it."""
    runner: str | None
    """--launcher (pdsh when not given), lower case; None where the files leave it unresolved."""
    runner_evidence: str
    local: bool
    """--no_ssh: this host's ranks are started here (runner.py: deepspeed.launcher.launch, with the flag)."""
    force_multi: bool
    where: str
    """The launch line."""


@dataclass(frozen=True)
class Hostfile:
    """A DeepSpeed hostfile: slots per host in line order, and the evidence of its first host line."""

    slots: dict[str, int]
    evidence: str
    lines: dict[str, str] = field(default_factory=dict)
    """host -> `FILE:LINE: text` of its line."""


@dataclass(frozen=True)
class AutoKey:
    """A DeepSpeed config value "auto", which the HF Trainer fills from TrainingArguments."""

    key: str
    """The config key, e.g. "train_micro_batch_size_per_gpu" or "bf16"."""
    field: str
    """The field it fills (LayoutRead or JobRead; "precision" for bf16/fp16 "enabled")."""
    evidence: str


@dataclass
class Settings:
    """What one file states (or the merge of several), filled by a reader: typed values through `put`, which
    records the evidence of each in `sources` in reading order ("" for a value a rule fills without evidence,
    left out of the LaunchLayout's sources)."""

    path: str
    layout: LayoutRead = field(default_factory=LayoutRead)
    job: JobRead = field(default_factory=JobRead)
    recipe: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    override: bool = False
    """CLI overrides (torchtitan flags, Hydra overrides, MaxText key=value) win over config files instead of
    conflicting."""
    keys: dict[str, tuple[Any, str]] | None = None
    """The framework's own keys as read, each with its evidence (torchtitan dotted keys, MaxText keys), for
    its join step to interpret."""
    key_sites: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)
    """torchtitan: each key of `keys` -> (its spelling in the file, the file, the line), for the key check."""
    config_file: tuple[str, str] | None = None
    """Config file the command line names (torchtitan --job.config_file, MaxText's, Bridge --config-file)."""
    env_keys: dict[str, tuple[str, str]] = field(default_factory=dict)
    """MaxText: the M_<KEY> environment variables its train command starts with, key -> (text, evidence), which
    pyconfig lays over the merged config (maxtext.env_overrides)."""
    deepspeed_config: tuple[str, str] | None = None
    """--deepspeed_config of a Megatron-DeepSpeed command."""
    deepspeed_config_word: Word | None = None
    """The path word of that flag (or of an HF Trainer's --deepspeed CONFIG) as the script expanded it."""
    heredoc: HereDoc | None = None
    """The here-document the script writes that config with before its launch (readers.dispatch.heredoc_config),
    which the audit reads as the job's DeepSpeed JSON where no JSON is among the files."""
    json_written: HereDoc | None = None
    """The here-document this DeepSpeed JSON's settings were read from (no file of its own: `audit --out` writes
    none back)."""
    num_nodes: tuple[str, str] | None = None
    """The deepspeed launcher's --num_nodes (text, evidence)."""
    num_gpus: tuple[str, str] | None = None
    """The deepspeed launcher's --num_gpus."""
    hostfile: Hostfile | None = None
    hf_auto: tuple[AutoKey, ...] = ()
    deepspeed_binding: DeepSpeedBinding | None = None
    megatron_lm: bool = False
    """A Megatron-LM argument list was read (its defaults apply after the merge: megatron.join)."""
    megatron_without_deepspeed: str | None = None
    """The evidence of a Megatron model's argument list (--num-layers, --hidden-size, ...) without --deepspeed: Megatron
    trains it itself, whatever DeepSpeed JSON sits beside it (deepspeed.join refuses to price it as DeepSpeed)."""
    bridge: bool = False
    """Megatron-Bridge keys were read (a ConfigContainer YAML or Hydra overrides): its own defaults apply."""
    megatron_deepspeed: bool = False
    """A Megatron-DeepSpeed command (--deepspeed with Megatron's model flags) was read."""
    pipeline_module: str | None = None
    """Evidence that a Megatron-DeepSpeed command builds its model as a PipelineModule, which DeepSpeed runs with its
    PipelineEngine: --deepspeed with the Megatron-DeepSpeed layout flags and no --no-pipeline-parallel."""
    offloaded: tuple[str, ...] = ()
    """ZeRO's offloads the files turn on (`offload_optimizer`, `offload_param`)."""
    micro_batch_one: str | None = None
    """Why the framework runs micro-batch 1 only (LaunchLayout.micro_batch_one)."""
    command_args: list[tuple[str, str | None]] = field(default_factory=list)
    """LaunchLayout.command_args."""
    context_axis: bool = False
    """LaunchLayout.context_axis."""
    deepspeed_moe: str | None = None
    """LaunchLayout.deepspeed_moe."""
    grad_accum_dtype: tuple[str, str] | None = None
    """A DeepSpeed JSON's `data_types.grad_accum_dtype` (as written, its evidence): the width of the BF16_Optimizer's
    gradient buffer, the model's own (bf16) where unset (runtime/engine.py get_data_types)."""
    engine_checkpoints_none: str | None = None
    """Evidence of a DeepSpeed pipeline's activation_checkpoint_interval 0: the engine checkpoints no whole layer,
    which is recompute none unless the model code states its own (ds_topology.py's `recompute = 'selective'`)."""
    neox: bool = False
    """A GPT-NeoX config is among the files: its own arguments decide DeepSpeed's checkpointing settings."""
    neox_configs: tuple[str, ...] = ()
    """A GPT-NeoX job's config files (LaunchLayout.neox_configs)."""
    maxtext_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.maxtext_keys (MaxText)."""
    config_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.config_keys (GPT-NeoX)."""
    config_spelling: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.config_spelling (GPT-NeoX)."""
    torchtitan_form: str | None = None
    """LaunchLayout.torchtitan_form (torchtitan before 0.3.0)."""
    torchtitan_stated: dict[str, tuple[str, str]] = field(default_factory=dict)
    """LaunchLayout.torchtitan_stated (torchtitan before 0.3.0)."""
    bridge_keys: dict[str, str] = field(default_factory=dict)
    """LaunchLayout.bridge_keys (Megatron-Bridge)."""
    base_config: str | None = None
    """LaunchLayout.base_config (Megatron-Bridge overrides)."""
    warnings: list[str] = field(default_factory=list)
    """LaunchLayout.warnings."""
    accelerate_launch: str | None = None
    """Evidence of an `accelerate launch` line: its config file says what runs (`accelerate_read` once read)."""
    accelerate_read: bool = False
    hf_precision: tuple[str | None, str] | None = None
    """The HF Trainer's --bf16 / --fp16 as its flags set them ("bf16", "fp16" or None for neither), with evidence."""
    bridge_full: bool = False
    """A whole Megatron-Bridge ConfigContainer was read (a saved run_config.yaml, its sections' `_target_` keys): no
    base is left unread, whatever overrides come with it."""
    unknown_keys: list[UnknownKey] = field(default_factory=list)
    """LaunchLayout.unknown_keys."""
    refusal: str | None = None
    """LaunchLayout.refusal (the first a rule found)."""
    sixteen_bit: str | None = None
    """Megatron's --bf16 / --fp16 as given (evidence): without either an FP8 job keeps fp32 weights."""
    model_elsewhere: str | None = None
    """Why the launch's model arguments may come from somewhere the files do not show (a variable they do not set,
    --use-checkpoint-args, --yaml-cfg): Megatron's model defaults and the refusals that read them do not apply."""
    hf_trainer: str | None = None
    """Evidence that a HuggingFace Trainer script runs the job (its `--deepspeed CONFIG`, or TrainingArguments
    flags such as --per_device_train_batch_size): DeepSpeed's engine under the Trainer, which fills the JSON's "auto"
    values from its flags and refuses a JSON value that differs from them."""
    json_keys: dict[str, str] = field(default_factory=dict)
    """The DeepSpeed JSON's keys, flattened, each with its value as written ("auto" kept)."""
    json_paths: tuple[str, ...] = ()
    """The DeepSpeed JSON files read."""
    deepspeed_config_arg: str | None = None
    """Evidence of a `--deepspeed_config PATH` on a script's command line: DeepSpeed's own argument
    (deepspeed.add_config_arguments), whose JSON DeepSpeed reads as written, "auto" unfilled."""
    json_sync: tuple[bool, str] | None = None
    """A DeepSpeed JSON's activation_checkpointing.synchronize_checkpoint_boundary (value, evidence), which the
    join applies unless the training code passes its own (Megatron-DeepSpeed's, GPT-NeoX's configure call)."""

    def put(self, name: str, value: Any, evidence: str) -> None:
        """Set field `name` (a LayoutRead or JobRead field, or "recipe.FIELD") with its evidence."""
        if name.startswith("recipe."):
            self.recipe[name.removeprefix("recipe.")] = value
        elif name in _LAYOUT_FIELDS:
            self.layout = dataclasses.replace(self.layout, **{name: value})
        elif name in _JOB_FIELDS:
            self.job = dataclasses.replace(self.job, **{name: value})
        else:
            raise KeyError(f"no launch field {name!r}")
        self.sources[name] = evidence

    def has(self, name: str) -> bool:
        """Whether the files (or a rule) set `name`."""
        return name in self.sources

    def value(self, name: str, default: Any = None) -> Any:
        """The value of `name`, or `default` when nothing set it."""
        if name not in self.sources:
            return default
        if name.startswith("recipe."):
            return self.recipe[name.removeprefix("recipe.")]
        return getattr(self.layout if name in _LAYOUT_FIELDS else self.job, name)

    def entry(self, name: str) -> tuple[Any, str] | None:
        """(value, evidence) of `name`, or None when nothing set it."""
        return (self.value(name), self.sources[name]) if name in self.sources else None

    def take(self, name: str) -> tuple[Any, str] | None:
        """`entry(name)`, then unset it (a value the join step turns into others)."""
        found = self.entry(name)
        if found is not None:
            del self.sources[name]
            if name.startswith("recipe."):
                del self.recipe[name.removeprefix("recipe.")]
            elif name in _LAYOUT_FIELDS:
                self.layout = dataclasses.replace(self.layout, **{name: None})
            else:
                self.job = dataclasses.replace(self.job, **{name: None})
        return found

    def reading(self, framework: str) -> Reading:
        """The frozen record the core reads: the values set and the evidence that has text."""
        return Reading(framework, self.layout, self.job, dict(self.recipe),
                       {k: ev for k, ev in self.sources.items() if ev}, tuple(self.ignored),
                       "gpt-neox" if self.neox else "hf-trainer" if self.hf_trainer else None,
                       # GPT-NeoX's config keys; else a DeepSpeed JSON's flat keys (HF Trainer's and plain
                       # DeepSpeed's: the change list states what the file has, changes.launch_changes)
                       dict(self.config_keys if self.neox else self.json_keys),
                       tuple(self.unknown_keys),
                       dict(self.config_spelling), self.torchtitan_form, dict(self.torchtitan_stated),
                       dict(self.bridge_keys), None if self.bridge_full else self.base_config, tuple(self.warnings),
                       self.refusal, self.pipeline_module, tuple(self.offloaded), self.megatron_deepspeed,
                       self.micro_batch_one, tuple(self.command_args), self.context_axis, self.deepspeed_moe,
                       self.json_paths[0] if len(self.json_paths) == 1 and self.json_written is None else None,
                       tuple(self.neox_configs),
                       dict(self.maxtext_keys),
                       str(self.json_written.command) if self.json_written is not None else None)
