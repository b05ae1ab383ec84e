// Tables of the FSDP keys accelerate and HF TrainingArguments read. Written from
// reading the sources listed in fsdpKeysSource(); nothing here is copied from them.
//
// Source tags used in the per-entry comments:
//   [DC]  accelerate src/accelerate/utils/dataclasses.py @b0d8fa95 (upstream):
//         FullyShardedDataParallelPlugin fields, __post_init__ (env-var fallbacks),
//         set_state_dict_type, set_auto_wrap_policy.
//   [UL]  accelerate src/accelerate/utils/launch.py, prepare_multi_gpu_env: which
//         args.fsdp_* become FSDP_* env vars (recent 1.x text; see fsdpKeysSource()).
//   [CL]  accelerate src/accelerate/commands/launch.py: launch_command_parser FSDP
//         flags and their defaults, _validate_launch_command (config file -> args).
//   [CA]  accelerate src/accelerate/commands/config/config_args.py: BaseConfig /
//         ClusterConfig fields, process_config, unknown-key check.
//   [CC]  accelerate src/accelerate/commands/config/cluster.py: what
//         `accelerate config` writes into fsdp_config.
//   [K]   accelerate src/accelerate/utils/constants.py: FSDP_SHARDING_STRATEGY,
//         FSDP_AUTO_WRAP_POLICY, FSDP_BACKWARD_PREFETCH, FSDP_STATE_DICT_TYPE,
//         FSDP2_STATE_DICT_TYPE, FSDP2_PYTORCH_VERSION.
//   [ENV] accelerate src/accelerate/utils/environment.py: str_to_bool (y/yes/t/true/
//         on/1 and n/no/f/false/off/0, case-insensitive; anything else -> ValueError).
//   [ACC] accelerate accelerator.py FSDP1 wrap kwargs: the sharding strategy passed
//         to FSDP is `sharding_strategy or reshard_after_forward`.
//   [REF] /work/shared/reference/fsdp-failure-modes.md section 3.3 (fsdp_utils.py
//         behaviour that was not re-read for this table).
//   [TA]  transformers src/transformers/training_args.py @00349ae8
//         (_process_fsdp_args, fsdp_config docstring).
//   [TA2] a newer training_args.py (after transformers PR #45640 made FSDP2 the
//         default): version defaults to 2, new keys cpu_offload / auto_wrap_policy /
//         state_dict_type; commit not pinned.
//   [TR]  transformers trainer.py, after the Accelerator is created: reads
//         limit_all_gathers and activation_checkpointing from fsdp_config (commit
//         not pinned).
//   [D]   derived from reading the code above; not observed at run time.
//   [V]   the releases that read a renamed key (RenamedKey::ignoredSince / replacementSince): the
//         huggingface/accelerate repository at its release tags (v0.1.0-v1.14.0, HEAD 16cb6eb8),
//         src/accelerate/utils/launch.py and src/accelerate/commands/launch.py, read with git.
//
// How accelerate reads `fsdp_config:` ([CL] _validate_launch_command): every entry
// is copied onto the launcher's argparse namespace; a key that does not start with
// "fsdp" gets "fsdp_" prepended first (so `min_num_params` means
// `fsdp_min_num_params`). Values keep their YAML type (PyYAML, YAML 1.1). Keys that
// no code reads are silently ignored. Explicit `--fsdp_*` CLI flags win over the
// file. prepare_multi_gpu_env [UL] then exports env vars, mostly as
// str(value).lower(), and FullyShardedDataParallelPlugin.__post_init__ [DC] reads
// them only for fields the script did not pass explicitly.
//
// Prefix rule for TrainingArguments.fsdp_config ([TA], [TA2]): each key that starts
// with "fsdp_" has those 5 characters removed, then the lookups use the bare name.
// So `fsdp_version` and `version` mean the same thing, and trainerFsdpConfigKeys()
// lists bare names. In recent 5.x the stripping applies to dicts and JSON files
// alike. Older 4.x copies in the index strip the prefix only when fsdp_config is
// a JSON file path, not when it is a dict.
#include "config/FsdpKeys.h"

namespace shardlint::rules::config {

const std::vector<FsdpKey>& accelerateFsdpKeys() {
  static const std::vector<FsdpKey> keys = {
      // [CL] flag choices 1/2, default "1"; [UL] exported as FSDP_VERSION; [DC] int() of it;
      // [K] FSDP2_PYTORCH_VERSION.
      {.name = "fsdp_version",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"1", "2"},
       .launcherDefault = "1",
       .pluginDefault = "1",
       .note = "selects FSDP1/FSDP2; the plugin int()s the env value; 2 needs torch >= 2.6.0 (ImportError otherwise); "
               "only valid inside fsdp_config (at top level the file is rejected as having unknown keys)"},

      // [CL] default "FULL_SHARD"; [UL] always exported as FSDP_SHARDING_STRATEGY; [DC] read for
      // v1 only, upper-cased, digits 1-5 accepted; [K] strategy list.
      {.name = "fsdp_sharding_strategy",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Enum,
       .values = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "1", "2", "3", "4", "5"},
       .launcherDefault = "FULL_SHARD",
       .pluginDefault = "FULL_SHARD",
       .note = "case-insensitive; deprecated in favour of fsdp_reshard_after_forward but on v1 it wins: the launcher "
               "always exports it (default FULL_SHARD) and FSDP1 uses it first; unknown name -> KeyError; "
               "silently ignored on v2"},

      // [CL] default "true"; [UL] exported lower-cased as FSDP_RESHARD_AFTER_FORWARD; [DC] v2:
      // str_to_bool, v1: strategy name, read only when no sharding strategy is set; [ACC]; [CC]
      // `accelerate config` writes this key (not fsdp_sharding_strategy) for both versions.
      {.name = "fsdp_reshard_after_forward",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Any,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "FULL_SHARD (v1) / true (v2)",
       .note = "v2: a bool (true/false/yes/no/on/off/1/0), other strings such as FULL_SHARD -> ValueError invalid truth "
               "value [D]; v1: a sharding-strategy name, but under accelerate launch the always-exported "
               "fsdp_sharding_strategy (FULL_SHARD) takes precedence, so a v1 value here is not applied [D]"},

      // [CL] default "false"; [UL] FSDP_OFFLOAD_PARAMS; [DC] str_to_bool -> cpu_offload
      // (CPUOffload on v1, CPUOffloadPolicy on v2).
      {.name = "fsdp_offload_params",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "str_to_bool of the exported text: a non-boolean string -> ValueError; plugin field is cpu_offload"},

      // [CL] default None; [UL] exported only when set; [DC] env fallback NO_WRAP, upper-cased
      // membership test against [K] FSDP_AUTO_WRAP_POLICY; [REF] NO_WRAP + activation checkpointing.
      {.name = "fsdp_auto_wrap_policy",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"},
       .launcherDefault = "NO_WRAP",
       .pluginDefault = "NO_WRAP",
       .note = "case-insensitive; any other value -> ValueError (invalid auto wrap policy); absent = NO_WRAP (launcher "
               "exports nothing); NO_WRAP with fsdp_activation_checkpointing on FSDP2 crashes with TypeError [REF]"},

      // [CL] default None; [UL] FSDP_TRANSFORMER_CLS_TO_WRAP (note the different env name); [DC]
      // split(",") without strip, fallback model._no_split_modules, class-name lookup.
      {.name = "fsdp_transformer_layer_cls_to_wrap",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::ClassList,
       .values = {},
       .launcherDefault = "",
       .pluginDefault = "",
       .note = "comma-separated class names, split without stripping spaces, exact __class__.__name__ match, "
               "else ValueError (class not found); used only with TRANSFORMER_BASED_WRAP; absent -> the model's "
               "_no_split_modules; a YAML list is exported as its Python repr and breaks the names [D]"},

      // [CL] default int(1e8) (float 1e8 in older releases, e.g. upstream @79a84264); [UL]
      // FSDP_MIN_NUM_PARAMS always exported; [DC] int(env, default 0), used for SIZE_BASED_WRAP,
      // 0 disables the policy.
      {.name = "fsdp_min_num_params",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Int,
       .values = {},
       .launcherDefault = "100000000",
       .pluginDefault = "0",
       .note = "used only with SIZE_BASED_WRAP; the plugin int()s the env text, so a PyYAML-1.1 string such as 1e8 "
               "-> ValueError [D]; 0 silently turns the policy into no wrapping; a non-int passed in code -> ValueError"},

      // [CL] default None; [UL] exported only when set; [DC] env read for both versions,
      // NO_PREFETCH -> None, upper-cased, digits accepted; v2: warning then None; [K] list.
      {.name = "fsdp_backward_prefetch",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Enum,
       .values = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH", "1", "2"},
       .launcherDefault = "NO_PREFETCH",
       .pluginDefault = "NO_PREFETCH",
       .note = "case-insensitive; unknown name -> KeyError; on v2 the plugin logs that it is not supported in FSDP2 "
               "and drops it (also when it comes from the config file)"},

      // [CL] default None; [UL] exported only when set; [DC] set_state_dict_type: env fallback
      // by version, upper-cased or digit, LOCAL on v2 -> ValueError; [K] FSDP2_STATE_DICT_TYPE.
      {.name = "fsdp_state_dict_type",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT", "1", "2", "3"},
       .launcherDefault = "FULL_STATE_DICT (v1) / SHARDED_STATE_DICT (v2)",
       .pluginDefault = "FULL_STATE_DICT (v1) / SHARDED_STATE_DICT (v2)",
       .note = "case-insensitive; unknown name -> KeyError; LOCAL_STATE_DICT with v2 -> ValueError (FSDP2 supports "
               "only SHARDED_STATE_DICT and FULL_STATE_DICT)"},

      // [CL] default "false"; [UL] always exported; [DC] env read for v1 only; any non-None value
      // passed in code on v2 -> ValueError.
      {.name = "fsdp_forward_prefetch",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "FSDP1 only; on v2 the config-file value is silently ignored (env not read), while "
               "FullyShardedDataParallelPlugin(forward_prefetch=...) on v2 raises ValueError (not implemented)"},

      // [CL] default "true"; [UL] always exported; [DC] env read for v1 only with fallback False;
      // passed in code on v2 -> obsolete warning.
      {.name = "fsdp_use_orig_params",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "false",
       .note = "FSDP1 only; launcher default true but a plugin built in code defaults to false (optimizer built "
               "before prepare then updates nothing, C03); on v2 the config-file value is silently ignored, in code "
               "it logs an obsolete warning"},

      // [CL] default "true"; [UL] launcher raises when this is truthy and sync_module_states is
      // falsy (checked before the version matters); [DC] env fallback False; v1 forces sync on.
      {.name = "fsdp_cpu_ram_efficient_loading",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "false",
       .note = "launcher ValueError when true with fsdp_sync_module_states false, on v1 and v2 alike; the check "
               "uses Python truthiness of the raw value, so an absent key (default \"true\") or a quoted \"false\" "
               "counts as true [D]; plugin on v1 warns and forces sync_module_states on"},

      // [CL] default "true"; [UL] always exported; [DC] env read for v1 only with fallback False;
      // passed in code on v2 -> obsolete warning; [CC] not asked for v2.
      {.name = "fsdp_sync_module_states",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "false",
       .note = "FSDP1 only; on v2 the config-file value is silently ignored (env not read) but still takes part in "
               "the launcher's cpu_ram_efficient_loading check; in code on v2 it logs an obsolete warning"},

      // [CL] default "false"; [UL] always exported; [DC] str_to_bool for both versions;
      // [REF] layers come from the auto wrap policy.
      {.name = "fsdp_activation_checkpointing",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "checkpoints the layers the auto wrap policy selects; on FSDP2 with NO_WRAP (or SIZE_BASED_WRAP and "
               "min_num_params 0) the policy is None and prepare fails with TypeError [REF]"},

      // [CL] `--fsdp_activation_checkpointing_offload`, default "false"; [UL] always exported as
      // FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD; [DC] str_to_bool; True needs activation_checkpointing (else
      // ValueError) and fsdp_version 2 (else ValueError). Read in accelerate 1.15.0 as installed (not in
      // v1.14.0 nor in huggingface/accelerate 16cb6eb8, July 2026).
      {.name = "fsdp_activation_checkpointing_offload",
       .fsdp1 = false,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "FSDP2 only (accelerate 1.15.0+): offloads the checkpointed activations to the CPU; true on FSDP1, or "
               "without fsdp_activation_checkpointing, raises ValueError in the plugin"},

      // No CLI flag [CL]; [UL] exported only when present (getattr); [DC] ignored_modules: string
      // = module-name regex (full match); FSDP2 on torch < 2.7 -> warning and dropped; [REF].
      {.name = "fsdp_ignored_modules",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::String,
       .values = {},
       .launcherDefault = "",
       .pluginDefault = "",
       .note = "regex matched (full match) against module names; ignored modules are not sharded and their gradients "
               "are not reduced; FSDP2 turns them into ignored_params and needs torch >= 2.7 (else warning and "
               "dropped in recent releases, TypeError before accelerate 1.13 [REF])"},
  };
  return keys;
}

const std::vector<RenamedKey>& accelerateRenamedKeys() {
  static const std::vector<RenamedKey> keys = {
      // [UL] no code reads the old name any more; old usage-guide YAML examples (docs v0.12-v0.25)
      // show it; renamed in accelerate PR #2288 ([REF] C22). [V] below: the versions.
      {.old = "fsdp_backward_prefetch_policy",
       .replacement = "fsdp_backward_prefetch",
       .note = "old spelling, silently ignored by current launchers, so no backward prefetch is applied",
       .ignoredSince = "1.0.0",
       .replacementSince = "0.26.0",
       .versionSource =
           "accelerate git tags read with `git grep`: through v0.25.0 (d08c23c2) utils/launch.py exports "
           "FSDP_BACKWARD_PREFETCH from args.fsdp_backward_prefetch_policy and commands/launch.py has no "
           "--fsdp_backward_prefetch; PR #2288 (848ed800, first in v0.26.0) adds fsdp_backward_prefetch and maps "
           "the old name onto it with a FutureWarning, as v0.33.0 (28a3b985) and v0.34.2 (c61f41c6, the last "
           "0.x) still do; PR #3098, a sweep of deprecated options (79a84264, first in v1.0.0rc0 and v1.0.0), "
           "removes the flag and the mapping"},

      // [CC] an FSDP2-era `accelerate config` (fork mirror CloudEngineHub/accelerate@779ee384) wrote it;
      // [UL] current prepare_multi_gpu_env does not read it; context parallelism now comes from the
      // top-level parallelism_config mapping ([CL]: its keys are copied verbatim, no prefix added).
      // [V] no tagged release v0.1.0-v1.14.0 reads it (only the unreleased `context-parallel` branch,
      // 351d9890, exported FSDP_CONTEXT_PARALLEL_SIZE): ignored whatever the pin.
      {.old = "fsdp_context_parallel_size",
       .replacement = "parallelism_config: {parallelism_config_cp_size: N}",
       .note = "written by `accelerate config` for FSDP2 in some 1.x releases; silently ignored by current launchers",
       .ignoredSince = "",
       .replacementSince = "",
       .versionSource = "no tagged accelerate release's utils/launch.py or commands/launch.py reads it"},

      // [DC] limit_all_gathers is a plugin field with no env fallback; [CL] no flag; [UL] not exported.
      // [V] no tagged release v0.1.0-v1.14.0 has a launcher flag or env export for it.
      {.old = "fsdp_limit_all_gathers",
       .replacement = "FullyShardedDataParallelPlugin(limit_all_gathers=...) in code",
       .note = "not a config-file key: the launcher never reads it, the plugin default (true) applies",
       .ignoredSince = "",
       .replacementSince = "",
       .versionSource = "no tagged accelerate release's utils/launch.py or commands/launch.py reads it"},
  };
  return keys;
}

const std::vector<std::string_view>& accelerateTopLevelKeys() {
  // [CA] ClusterConfig = BaseConfig fields + cluster fields; any other key makes load_config_from_file
  // raise ValueError (unknown keys). The list is the union over the versions read, so a key valid
  // in one supported release is not reported. SageMaker configs (compute_environment
  // AMAZON_SAGEMAKER) use SageMakerConfig instead: ec2_instance_type, iam_role_name, image_uri,
  // profile, region, num_machines, gpu_ids, base_job_name, pytorch_version, transformers_version,
  // py_version, sagemaker_inputs_file, sagemaker_metrics_file, additional_args, dynamo_config,
  // enable_cpu_affinity (plus the BaseConfig fields).
  static const std::vector<std::string_view> keys = {
      // BaseConfig
      "compute_environment",  // defaults to LOCAL_MACHINE when absent
      "distributed_type",     // required: ValueError when absent
      "mixed_precision",
      "use_cpu",
      "debug",
      // ClusterConfig
      "num_processes",
      "machine_rank",
      "num_machines",
      "gpu_ids",
      "main_process_ip",
      "main_process_port",
      "rdzv_backend",
      "same_network",
      "main_training_function",
      "enable_cpu_affinity",
      "fp8_config",
      "deepspeed_config",
      "fsdp_config",
      "parallelism_config",  // recent 1.x (fork mirrors Laplasjan107@440fbfdc, mrhaoxx@24e46eb6)
      "tp_config",           // some 1.x releases (upstream @002dd35a), gone later
      "megatron_lm_config",
      "ipex_config",  // older releases (upstream @002dd35a, @6a0677cc); removed in the newest mirror
      "mpirun_config",
      "downcast_bf16",
      "tpu_name",
      "tpu_zone",
      "tpu_use_cluster",
      "tpu_use_sudo",
      "command_file",
      "commands",
      "tpu_vm",
      "tpu_env",
      "dynamo_config",
      // Legacy keys that process_config converts before the unknown-key check.
      "fp16",            // folded into mixed_precision
      "dynamo_backend",  // moved into dynamo_config
  };
  return keys;
}

// The Trainer table reuses FsdpKey as follows: launcherDefault holds the value
// TrainingArguments substitutes when the key is absent (the consumer's own
// default; "" when it passes nothing), pluginDefault holds the
// FullyShardedDataParallelPlugin default that applies when transformers does not
// pass the key. fsdp1/fsdp2 say for which `version` transformers forwards the key.
// Names are bare (see the prefix rule at the top of this file).
const std::vector<FsdpKey>& trainerFsdpConfigKeys() {
  static const std::vector<FsdpKey> keys = {
      // [TA] int(fsdp_config.get("version", 1)); [TA2] default 2; docstring spells it fsdp_version.
      {.name = "version",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"1", "2"},
       .launcherDefault = "1 (2 after transformers PR #45640)",
       .pluginDefault = "1",
       .note = "written as fsdp_version or version; int() of the value; the default flipped from 1 to 2 when "
               "transformers made FSDP2 the default, and [TA2] warns that FSDP1 is deprecated"},

      // [TA] defaulted to 0; >0 with the auto_wrap option selects SIZE_BASED_WRAP; ValueError when
      // combined with transformer_layer_cls_to_wrap; [TA2] used only with auto_wrap_policy SIZE_BASED_WRAP.
      {.name = "min_num_params",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Int,
       .values = {},
       .launcherDefault = "0",
       .pluginDefault = "0",
       .note = "[TA]: only applied when `fsdp` includes auto_wrap, and ValueError (mutually exclusive) if "
               "transformer_layer_cls_to_wrap is also set; [TA2]: only applied with auto_wrap_policy SIZE_BASED_WRAP"},

      // [TA] string -> one-element list, joined with "," for the plugin; [DC] splits without strip.
      {.name = "transformer_layer_cls_to_wrap",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::ClassList,
       .values = {},
       .launcherDefault = "",
       .pluginDefault = "",
       .note = "string or list of class names; joined with commas and split again by accelerate without strip, so "
               "names must not carry spaces; absent -> the model's _no_split_modules; [TA] needs the auto_wrap option"},

      // [TA] FSDP1 only: get(.., "NO_PREFETCH").upper(); not forwarded for version 2.
      {.name = "backward_prefetch",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Enum,
       .values = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"},
       .launcherDefault = "NO_PREFETCH",
       .pluginDefault = "NO_PREFETCH",
       .note = "case-insensitive (upper-cased; the docstring shows backward_pre / backward_post); must be a string; "
               "silently not forwarded on version 2"},

      // [TA] FSDP1 only: str_to_bool(str(value).lower()).
      {.name = "forward_prefetch",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "str_to_bool of the value (non-boolean string -> ValueError); silently not forwarded on version 2"},

      // [TR] fsdp_plugin.limit_all_gathers = fsdp_config.get(...) after Accelerator creation;
      // [DC] plugin default True; [TA2] forwarded only for version 1.
      {.name = "limit_all_gathers",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "",
       .pluginDefault = "true",
       .note = "FSDP1 option; the [TA] docstring claims default false but the plugin default true applies when "
               "absent; [TA2] forwards it only for version 1"},

      // [TA] FSDP1 only: default "true".
      {.name = "use_orig_params",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "false",
       .note = "transformers defaults it to true (the bare plugin default is false); silently not forwarded on "
               "version 2"},

      // [TA] forwarded for both versions, default "true"; [TA2] forwarded for version 1 only;
      // [DC] on v2 a non-None value logs an obsolete warning.
      {.name = "sync_module_states",
       .fsdp1 = true,
       .fsdp2 = false,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "true",
       .pluginDefault = "false",
       .note = "[TA] passes it on version 2 too, where the plugin logs an FSDP2 obsolete warning; [TA2] forwards it "
               "only on version 1"},

      // [TA] default "false"; ValueError when "true" with sync_module_states "false"; exports
      // FSDP_CPU_RAM_EFFICIENT_LOADING.
      {.name = "cpu_ram_efficient_loading",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "[TA] ValueError when true with sync_module_states false; also sets env FSDP_CPU_RAM_EFFICIENT_LOADING; "
               "only effective if the process group exists before from_pretrained (C16)"},

      // [TR] read after Accelerator creation, ValueError together with gradient_checkpointing;
      // [TA2] forwarded to the plugin when present.
      {.name = "activation_checkpointing",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "Trainer ValueError when gradient_checkpointing is also true; prefer it over gradient_checkpointing "
               "with FSDP (warning)"},

      // [TA] v2: str_to_bool(get(.., "false")); v1: str(get(.., "FULL_SHARD")).lower();
      // [TA2] v2 default True; legacy `fsdp` strategy options are mapped onto it.
      {.name = "reshard_after_forward",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Any,
       .values = {},
       .launcherDefault = "false (v2; true after PR #45640) / full_shard (v1)",
       .pluginDefault = "FULL_SHARD (v1) / true (v2)",
       .note = "v2: boolean, non-boolean string -> ValueError; [TA] defaults it to false on v2 (ZeRO-2 behaviour even "
               "with fsdp=full_shard); v1: strategy name, shadowed by the strategy from the `fsdp` option [ACC], a "
               "boolean on v1 -> KeyError in the plugin [D]"},

      // [TA2] only: get("cpu_offload", False); legacy `fsdp` "offload" sets it. [TA]: offload comes
      // only from the `fsdp` option.
      {.name = "cpu_offload",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "false",
       .note = "read only by [TA2]; in [TA] and earlier it is ignored (use `fsdp=\"full_shard offload\"` there)"},

      // [TA2] only: exact membership test against accelerate's FSDP_AUTO_WRAP_POLICY, default
      // TRANSFORMER_BASED_WRAP. [TA]: the policy comes from the `fsdp` auto_wrap option.
      {.name = "auto_wrap_policy",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"},
       .launcherDefault = "TRANSFORMER_BASED_WRAP",
       .pluginDefault = "NO_WRAP",
       .note = "read only by [TA2], case-sensitive there (lower-case spellings -> ValueError); ignored by [TA] and "
               "earlier, where `fsdp` must contain auto_wrap instead"},

      // [TA2] only: get("state_dict_type", "FULL_STATE_DICT"); [DC] upper-cases, LOCAL on v2 -> ValueError.
      {.name = "state_dict_type",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Enum,
       .values = {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"},
       .launcherDefault = "FULL_STATE_DICT",
       .pluginDefault = "FULL_STATE_DICT (v1) / SHARDED_STATE_DICT (v2)",
       .note = "read only by [TA2] (default FULL_STATE_DICT even on FSDP2); ignored by [TA] and earlier; "
               "LOCAL_STATE_DICT with version 2 -> ValueError in the plugin"},

      // [TA] xla switches to PyTorch/XLA FSDP; the accelerate plugin is then not built.
      {.name = "xla",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "",
       .note = "true selects PyTorch/XLA FSDP: version and the accelerate plugin keys are then unused"},

      // [TA] copied into xla_fsdp_config; compute_dtype / buffer_dtype names become torch dtypes.
      {.name = "xla_fsdp_settings",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Any,
       .values = {},
       .launcherDefault = "",
       .pluginDefault = "",
       .note = "mapping of XLA FSDP wrapper arguments; used only when xla is true"},

      // [TA] warning when set without xla.
      {.name = "xla_fsdp_grad_ckpt",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "",
       .note = "only meaningful with xla true; otherwise a warning"},

      // [TA] defaulted to False; XLA SPMD FSDP variant.
      {.name = "xla_fsdp_v2",
       .fsdp1 = true,
       .fsdp2 = true,
       .type = ValueType::Bool,
       .values = {},
       .launcherDefault = "false",
       .pluginDefault = "",
       .note = "XLA FSDPv2 (SPMD) switch; only meaningful with xla true; unrelated to `version`"},
  };
  return keys;
}

const FsdpKey* findKey(const std::vector<FsdpKey>& table, std::string_view name) {
  for (const auto& key : table)
    if (key.name == name) return &key;
  return nullptr;
}

std::string_view fsdpKeysSource() {
  return "accelerate (huggingface/accelerate, about v1.13-v1.14; the search index stores each file at its own "
         "commit): src/accelerate/utils/dataclasses.py @b0d8fa95f4eebc359bf41b73cae91d2737cde338; "
         "src/accelerate/utils/launch.py prepare_multi_gpu_env, recent text read from the fork mirror "
         "Laplasjan107/accelerate@440fbfdc4dc994385e4c154fe90cd8f6b207ec45 and an unpinned index copy with the same "
         "FSDP block (upstream stored only at the older e7998c9fbcdb7ee72d3de9b57e9d4fde73964b8c); "
         "src/accelerate/commands/launch.py from the fork mirror Anai-Guo/accelerate@a8fe9c26da2ebac4419f135ffb2ab7c0ca26bbe2 "
         "(upstream stored only at the older 79a8426416a5b67d7e0e101ce20c8e805af88b71 and "
         "00785cd9fc2e6a153c4951f96208590b1ed4e166); src/accelerate/commands/config/config_args.py upstream "
         "@002dd35a68fd5d11953d1749dbd3e50a88db3062 and @6a0677cc2778d9e807f97e386a29eab0522d1731, recent fields from "
         "mirrors Laplasjan107/accelerate@440fbfdc4dc994385e4c154fe90cd8f6b207ec45 and "
         "mrhaoxx/accelerate@24e46eb68d80504a25b382b65fde977116d5b5ca; src/accelerate/commands/config/cluster.py "
         "upstream @002dd35a68fd5d11953d1749dbd3e50a88db3062 (before FSDP2) and the mirror "
         "CloudEngineHub/accelerate@779ee38461d91bf0a72a9e0b3f3e05adf9d9c2ef (FSDP2 questionnaire); "
         "src/accelerate/utils/constants.py and src/accelerate/utils/environment.py from unpinned index copies. "
         "transformers (huggingface/transformers): src/transformers/training_args.py "
         "@00349ae87eddc872ffa21a8a54f264375a0056a8 (_process_fsdp_args), plus an unpinned newer copy written after "
         "PR #45640 (FSDP2 default); trainer.py fsdp_config post-processing from unpinned copies. "
         "Behaviour of accelerate fsdp_utils.py (activation checkpointing with NO_WRAP, ignored_modules) is taken from "
         "shared/reference/fsdp-failure-modes.md section 3.3 (accelerate HEAD 16cb6eb8, v1.14.0). "
         "The releases that read each renamed key (accelerateRenamedKeys) come from huggingface/accelerate's release "
         "tags v0.1.0-v1.14.0, src/accelerate/utils/launch.py and src/accelerate/commands/launch.py read with git "
         "(RenamedKey::versionSource).";
}

}  // namespace shardlint::rules::config
