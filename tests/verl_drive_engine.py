#!/usr/bin/env python
"""Run verl's real engine training path on CPU (verl 0.8.0 and 0.9.1), deterministically.

    python tests/verl_drive_engine.py JOBS --out DIR [--updates N] [--pause S] [--seed S]
    torchrun --nproc_per_node 2 tests/verl_drive_engine.py JOBS --out DIR ...

JOBS is a comma-separated subset of ``engine-actor`` (policy, FSDPEngineWithLMHead + verl's
ppo_loss) and ``engine-critic`` (value model, FSDPEngineWithValueHead + verl's value_loss).

What runs is verl's own code from the worker down, the way verl's PPO trainer drives it
(RayPPOTrainer._update_actor / _update_critic without Ray): each job builds one
``verl.workers.engine_workers.TrainingWorker`` (EngineRegistry.new -> FSDP engine, initialize)
once; each round makes a fresh seeded rollout-shaped batch (left-padded prompts, right-padded
responses), converts it with verl's ``left_right_2_no_padding``, takes this rank's data-parallel
share and calls ``TrainingWorker.train_mini_batch``. Per rank and round that is 3 mini-batches
-> 3 calls of ``BaseEngine.train_batch`` (3 optimizer steps) -> 9 passes of the micro-batch loop
in ``FSDPEngine.forward_backward_batch`` (forward_only=False), for each job.

Engine set-up: tiny random 2-layer Qwen2 (vocab 96, hidden 32) saved to a temp folder, no
tokenizer, eager attention, fp32 (no autocast), no remove-padding, fixed micro-batch size 1,
AdamW. FSDP: **FSDP2** (strategy "fsdp2", torch fully_shard over a gloo "cpu" mesh). FSDP1 does
not run on CPU: verl builds it with FSDP(..., device_id=get_device_id(), sync_module_states=True)
and torch refuses CPU-resident modules there ("ValueError: The module has CPU parameters or
buffers when `sync_module_states=True`, which requires them to be on GPU", raised from
torch/distributed/fsdp/_init_utils.py via verl/workers/engine/fsdp/transformer_impl.py).

Adaptations (module attributes set from here; no verl file is edited):
  * verl 0.9: verl.plugin.platform has no CPU platform and falls back to "nvidia" (torch.cuda
    calls then fail). A CPU platform (device "cpu", torch.cpu, gloo) is registered with verl's
    own PlatformRegistry and made current with set_platform, before the engine modules load.
  * EngineRegistry: verl registers the FSDP engines for devices "cuda" and "npu" only; the same
    classes are registered for "cpu" with EngineRegistry.register.
  * verl.workers.engine_workers.get_torch_device: TrainingWorker reports
    max_memory_allocated/reserved, which torch.cpu lacks; it gets torch.cpu plus zeros for those.
  * verl 0.8 only: verl.utils.attention_utils._get_attention_functions takes pad/unpad from
    flash_attn.bert_padding on non-NPU hosts; it is pointed at verl's pure-torch copies in
    verl.utils.npu_flash_attn_utils (0.9 falls back to pure torch by itself).
  * engine-critic only: verl.utils.model.load_valuehead_model loads the value model with
    attn_implementation="flash_attention_2" hard-coded; a wrapper runs verl's function and, only
    while it runs, turns that argument of transformers' AutoModelForTokenClassification
    .from_pretrained into "eager".
Settings rather than patches: ``disable_auto_offload`` is set on the batch (nothing is offloaded;
on CPU the train-mode context would otherwise call engine.to("cpu") around every mini-batch
loop, which on a GPU it skips), gc.freeze() after imports (verl 0.8 gc.collect()s in engine.to),
and the optional rfc3987_syntax import of jsonschema (via ray) is blocked to save ~2 s.

Determinism: OMP_NUM_THREADS=1, torch.set_num_threads(1), use_deterministic_algorithms, seeded
weights and batches; gloo process group always (world 1 without torchrun).

Output: DIR/numbers-rank{R}.json = {"verl": version, "world": W, "rounds": [{job: metrics}]},
metrics as TrainingWorker.train_mini_batch returns them (losses, grad_norm per optimizer step,
per-micro-batch values) with the machine-dependent perf/* and mfu left out. Rank 0 prints one
summary line; verl's prints while building engines are swallowed (shown on failure).

Python packages the path needs beyond torch/ray/numpy/transformers/tensordict/omegaconf/
codetiming: peft, accelerate, datasets (pyarrow, dill, multiprocess, xxhash), pillow,
uvicorn, fastapi, einops.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import io
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import warnings

JOB_NAMES = ("engine-actor", "engine-critic")

# Batch geometry per rank and round: 3 mini-batches x 3 micro-batches of 1 sample.
MINI_PER_ROUND = 3
MICRO_PER_MINI = 3
MICRO_SIZE = 1
PROMPT_LEN = 6
RESPONSE_LEN = 6


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", help="comma-separated subset of " + ",".join(JOB_NAMES))
    parser.add_argument("--out", required=True, help="folder for numbers-rank{R}.json")
    parser.add_argument("--updates", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds to sleep between rounds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    jobs = [j for j in args.jobs.split(",") if j]
    unknown = [j for j in jobs if j not in JOB_NAMES]
    if not jobs or unknown:
        parser.error(f"unknown job(s) {unknown or jobs!r}; choose from {','.join(JOB_NAMES)}")
    args.jobs = jobs
    return args


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _prepare_environment():
    """Single-process defaults, one thread, quiet libraries; before torch/verl load."""
    if "WORLD_SIZE" not in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ["RANK"] = "0"
        os.environ["WORLD_SIZE"] = "1"
        os.environ["LOCAL_RANK"] = "0"
    os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"])
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.filterwarnings("ignore")
    # verl imports ray, ray imports jsonschema, and jsonschema's optional IRI format checker loads
    # rfc3987_syntax, which builds a grammar at import (~2 s). Nothing here validates IRIs.
    sys.modules.setdefault("rfc3987_syntax", None)


class _CpuDeviceModule:
    """What verl reads from its "device module" (torch.cuda on a GPU) that torch.cpu lacks."""

    def __getattr__(self, name):
        import torch

        return getattr(torch.cpu, name)

    @staticmethod
    def max_memory_allocated(*_a, **_k):
        return 0

    max_memory_reserved = memory_allocated = memory_reserved = max_memory_allocated

    @staticmethod
    def empty_cache():
        return None

    @staticmethod
    def reset_peak_memory_stats(*_a, **_k):
        return None

    @staticmethod
    def manual_seed(seed):
        import torch

        torch.manual_seed(seed)

    manual_seed_all = manual_seed


CPU_DEVICE_MODULE = _CpuDeviceModule()


def _install_cpu_platform(adaptations):
    """verl >= 0.9: make verl's platform layer answer "cpu" (it has no CPU platform)."""
    try:
        from verl.plugin.platform import PlatformBase, PlatformRegistry, set_platform
    except ImportError:  # verl 0.8: verl.utils.device already answers "cpu" without an accelerator
        return
    import contextlib as _cl

    import torch

    @PlatformRegistry.register(platform="cpu")
    class PlatformCPU(PlatformBase):
        device_name = "cpu"
        vendor_name = "cpu"
        device_module = torch.cpu  # verl tests `get_torch_device() == torch.cpu` for its CPU fallbacks

        def is_available(self):
            return True

        def current_device(self):
            return "cpu"

        def device_count(self):
            return 1

        def set_device(self, device_index):
            return None

        def synchronize(self, device_index=None):
            return None

        def manual_seed(self, seed):
            torch.manual_seed(seed)

        def manual_seed_all(self, seed):
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings):
            return None

        def empty_cache(self):
            return None

        def get_device_capability(self, device_index=0):
            return None, None

        def communication_backend_name(self):
            return "gloo"

        def visible_devices_envvar(self):
            return "CUDA_VISIBLE_DEVICES"

        def nvtx_range(self, msg):
            return _cl.nullcontext()

        def profiler_start(self):
            return None

        def profiler_stop(self):
            return None

        def ray_resource_name(self):
            return "CPU"

        def ray_noset_envvars(self):
            return []

        def is_ipc_supported(self):
            return False

        def cudart(self):
            return None

    set_platform(PlatformCPU())
    adaptations.append("verl.plugin.platform: registered and set a CPU platform (device 'cpu', backend gloo)")


def _wrap_valuehead_loader(adaptations):
    """verl loads the critic with attn_implementation="flash_attention_2" hard-coded (no CPU kernel).

    The wrapper runs verl's own load_valuehead_model, and only while it runs rewrites that one
    argument of transformers' AutoModelForTokenClassification.from_pretrained to "eager".
    """
    import transformers

    import verl.utils.model as verl_model

    original = verl_model.load_valuehead_model

    def load_valuehead_model(*args, **kwargs):
        auto = transformers.AutoModelForTokenClassification
        own = auto.__dict__.get("from_pretrained")
        bound = auto.from_pretrained

        def from_pretrained(cls, *a, **k):
            if k.get("attn_implementation") == "flash_attention_2":
                k["attn_implementation"] = "eager"
            return bound(*a, **k)

        auto.from_pretrained = classmethod(from_pretrained)
        try:
            return original(*args, **kwargs)
        finally:
            if own is None:
                del auto.from_pretrained
            else:
                auto.from_pretrained = own

    verl_model.load_valuehead_model = load_valuehead_model
    adaptations.append(
        "verl.utils.model.load_valuehead_model wrapped: its hard-coded attn_implementation="
        "'flash_attention_2' reaches transformers as 'eager'"
    )


def _route_padding_helpers(adaptations):
    """verl 0.8 takes unpad_input/pad_input from flash_attn.bert_padding on anything but an NPU.

    flash-attn has no CPU build; verl ships the same helpers in pure torch for its NPU branch
    (verl.utils.npu_flash_attn_utils), so the dispatcher is pointed there. verl 0.9 falls back
    to pure-torch helpers by itself and is left alone.
    """
    import verl.utils.attention_utils as attention_utils

    if hasattr(attention_utils, "_fallback_unpad_input") or importlib.util.find_spec("flash_attn") is not None:
        return
    from verl.utils import npu_flash_attn_utils as helpers

    attention_utils._get_attention_functions = lambda: (
        helpers.index_first_axis,
        helpers.pad_input,
        helpers.rearrange,
        helpers.unpad_input,
    )
    adaptations.append(
        "verl.utils.attention_utils._get_attention_functions -> verl.utils.npu_flash_attn_utils (pure torch)"
    )


def _save_tiny_models(root, seed, want_critic):
    """A 2-layer Qwen2 causal LM (and its token-classification twin for the critic), random weights."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForTokenClassification

    config = Qwen2Config(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    paths = {}
    torch.manual_seed(seed)
    actor = Qwen2ForCausalLM(config)
    paths["actor"] = os.path.join(root, "actor")
    actor.save_pretrained(paths["actor"])
    if want_critic:
        config.num_labels = 1
        torch.manual_seed(seed + 1)
        critic = Qwen2ForTokenClassification(config)
        paths["critic"] = os.path.join(root, "critic")
        critic.save_pretrained(paths["critic"])
    return paths


def _synthetic_batch(gen, vocab, batch, critic):
    """Left-padded prompts + right-padded responses, as verl's rollout hands them to the trainer."""
    import torch

    from verl.utils.model import compute_position_id_with_mask

    seqlen = PROMPT_LEN + RESPONSE_LEN
    input_ids = torch.randint(3, vocab, (batch, seqlen), generator=gen)
    attention_mask = torch.ones(batch, seqlen, dtype=torch.long)
    left = torch.randint(0, 3, (batch,), generator=gen)
    valid = torch.randint(2, RESPONSE_LEN + 1, (batch,), generator=gen)
    for i in range(batch):
        attention_mask[i, : left[i]] = 0
        attention_mask[i, PROMPT_LEN + valid[i] :] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    position_ids = compute_position_id_with_mask(attention_mask)
    response_mask = attention_mask[:, PROMPT_LEN:].clone()
    fields = {
        "input_ids": input_ids,
        "prompts": input_ids[:, :PROMPT_LEN].clone(),
        "responses": input_ids[:, PROMPT_LEN:].clone(),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
    }
    shape = (batch, RESPONSE_LEN)
    if critic:
        fields["values"] = 0.1 * torch.randn(shape, generator=gen)
        fields["returns"] = torch.randn(shape, generator=gen)
    else:
        fields["old_log_probs"] = -4.6 + 0.2 * torch.randn(shape, generator=gen)
        fields["advantages"] = torch.randn(shape, generator=gen)
    return fields


def _plain(value):
    """Metrics as JSON: floats at full precision, lists flattened to floats."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    if hasattr(value, "value") and type(value).__name__ == "Metric":
        return _plain(value.value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


# metrics that measure the machine, not the training: left out of the numbers
_VOLATILE = ("perf/", "mfu")


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    _prepare_environment()
    t_start = time.perf_counter()

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    adaptations = []
    import verl

    _install_cpu_platform(adaptations)

    from functools import partial

    from verl import DataProto
    from verl.trainer.config import CheckpointConfig
    from verl.utils import tensordict_utils as tu
    from verl.utils.fsdp_utils import fsdp_version
    from verl.workers import engine_workers
    from verl.workers.config import CriticConfig, FSDPActorConfig, FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead
    from verl.workers.utils.losses import ppo_loss, value_loss
    from verl.workers.utils.padding import left_right_2_no_padding

    # verl registers its FSDP engines for device "cuda" and "npu" only
    registry = EngineRegistry._engines
    for model_type, engine_cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        if "cpu" not in registry.get(model_type, {}).get("fsdp", {}):
            EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(engine_cls)
    adaptations.append("EngineRegistry.register(device='cpu') for FSDPEngineWithLMHead and FSDPEngineWithValueHead")

    # TrainingWorker._postprocess_output logs get_torch_device().max_memory_allocated(); torch.cpu has none
    engine_workers.get_torch_device = lambda: CPU_DEVICE_MODULE
    adaptations.append("verl.workers.engine_workers.get_torch_device -> torch.cpu plus max_memory_* = 0")

    _route_padding_helpers(adaptations)
    if "engine-critic" in args.jobs:
        _wrap_valuehead_loader(adaptations)

    for logger_name in ("verl", "transformers", "torch.distributed", "torch.fx", "accelerate", "peft"):
        logging.getLogger(logger_name).setLevel(logging.ERROR)

    # verl 0.8 calls gc.collect() on every engine.to(); with everything above imported that costs
    # ~0.6 s a call. Freezing the import-time heap keeps collections short; nothing else changes.
    gc.collect()
    gc.freeze()

    t_import = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix=f"verl-drive-engine-r{rank}-")
    workers = {}
    try:
        paths = _save_tiny_models(tmp, args.seed, "engine-critic" in args.jobs)
        per_rank = MINI_PER_ROUND * MICRO_PER_MINI * MICRO_SIZE
        mini_global = MICRO_PER_MINI * MICRO_SIZE * world
        for job in args.jobs:
            critic = job == "engine-critic"
            model_config = HFModelConfig(
                path=paths["critic" if critic else "actor"],
                load_tokenizer=False,
                use_remove_padding=False,
                enable_gradient_checkpointing=False,
                override_config={"attn_implementation": "eager"},
            )
            engine_config = FSDPEngineConfig(
                strategy="fsdp2",
                forward_only=False,
                use_dynamic_bsz=False,
                micro_batch_size_per_gpu=MICRO_SIZE,
                infer_micro_batch_size_per_gpu=MICRO_SIZE,
                use_remove_padding=False,
                mixed_precision={"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"},
                use_torch_compile=False,
                seed=args.seed,
            )
            optimizer_config = FSDPOptimizerConfig(lr=1e-3, total_training_steps=args.updates * MINI_PER_ROUND)
            if critic:
                loss_config = CriticConfig(
                    strategy="fsdp2",
                    rollout_n=1,
                    ppo_mini_batch_size=mini_global,
                    ppo_micro_batch_size_per_gpu=MICRO_SIZE,
                )
            else:
                loss_config = FSDPActorConfig(
                    strategy="fsdp2",
                    rollout_n=1,
                    ppo_mini_batch_size=mini_global,
                    ppo_micro_batch_size_per_gpu=MICRO_SIZE,
                )
            config = engine_workers.TrainingWorkerConfig(
                model_type="value_model" if critic else "language_model",
                model_config=model_config,
                engine_config=engine_config,
                optimizer_config=optimizer_config,
                checkpoint_config=CheckpointConfig(),
            )
            chatter = io.StringIO()
            try:
                with contextlib.redirect_stdout(chatter):
                    worker = engine_workers.TrainingWorker(config=config)
                    worker.reset()
            except BaseException:
                sys.stderr.write(chatter.getvalue())
                raise
            assert fsdp_version(worker.engine.module) == 2, "expected verl's FSDP2 wrapping"
            loss_fn = value_loss if critic else ppo_loss
            worker.set_loss_fn(partial(loss_fn, config=loss_config))
            workers[job] = (worker, critic, mini_global)

        t_built = time.perf_counter()
        rounds = []
        for round_index in range(args.updates):
            if round_index and args.pause:
                time.sleep(args.pause)
            record = {}
            for job in args.jobs:
                worker, critic, mini_global = workers[job]
                gen = torch.Generator().manual_seed(args.seed * 1000 + round_index * 10 + (1 if critic else 0))
                fields = _synthetic_batch(gen, 96, per_rank * world, critic)
                data = DataProto.from_single_dict(fields, meta_info={"temperature": 1.0})
                batch_td = left_right_2_no_padding(data.to_tensordict())
                extra = {} if critic else {"calculate_entropy": False, "distillation_use_topk": False}
                tu.assign_non_tensor(
                    batch_td,
                    global_batch_size=mini_global,
                    mini_batch_size=mini_global,
                    epochs=1,
                    seed=args.seed,
                    dataloader_kwargs={"shuffle": False},
                    # Nothing is offloaded; on a GPU the train-mode context then moves nothing. On
                    # CPU, verl's "cpu" device name defeats that early return and each mini-batch
                    # loop would call engine.to("cpu") (a no-op move plus gc.collect()).
                    disable_auto_offload=True,
                    **extra,
                )
                local = tu.chunk_tensordict(batch_td, world)[rank]
                output = worker.train_mini_batch(local)
                metrics = tu.get(output, "metrics") if output is not None else {}
                record[job] = {
                    k: _plain(v) for k, v in sorted(metrics.items()) if not any(k.startswith(p) for p in _VOLATILE)
                }
            rounds.append(record)
        t_done = time.perf_counter()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    os.makedirs(args.out, exist_ok=True)
    numbers = {"verl": verl.__version__, "world": world, "rounds": rounds}
    with open(os.path.join(args.out, f"numbers-rank{rank}.json"), "w") as fh:
        json.dump(numbers, fh, indent=1, sort_keys=True)
    dist.barrier()
    if rank == 0:
        print(
            f"verl-drive-engine: {verl.__version__} world={world} rounds={args.updates} jobs={','.join(args.jobs)}"
            f" import={t_import - t_start:.1f}s build={t_built - t_import:.1f}s train={t_done - t_built:.1f}s",
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
