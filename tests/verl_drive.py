#!/usr/bin/env python
"""Drive verl's real PPO actor/critic code on CPU, deterministically and fast.

Usage::

    python tests/verl_drive.py JOBS --out DIR [--updates N] [--pause SECONDS] [--seed S] [--stop FILE]
    torchrun --nproc_per_node 2 tests/verl_drive.py JOBS --out DIR ...

JOBS is a comma-separated subset of ``actor-update,actor-logprob,critic-update``;
within each round they always run in that order. The models are built once;
each of the N rounds (``--updates``, default 1) makes a fresh seeded synthetic
batch and runs the jobs; ``--pause`` sleeps between rounds.  With ``--stop
FILE`` the job runs until FILE exists (``--updates`` is then the most rounds):
before each round after the first the ranks agree (one gloo all-reduce) whether
any of them sees FILE, so all stop after the same round, and each rank appends
one line per round done to ``DIR/progress-rank{R}.jsonl`` (``{"round": N,
"pid": P}``): a job that runs until it is told to stop, for tests that attach
to it mid-run.

What runs is verl's own, installed code, imported, never copied:

* ``verl.workers.actor.dp_actor.DataParallelPPOActor.update_policy``
* ``verl.workers.actor.dp_actor.DataParallelPPOActor.compute_log_prob`` on the
  actor (with an optimizer) and on a reference actor (``actor_optimizer=None``)
* ``verl.workers.critic.dp_critic.DataParallelPPOCritic.update_critic``

Each rank writes ``DIR/numbers-rank{R}.json``::

    {"verl": "0.7.1", "world": 2, "fsdp": true,
     "rounds": [{"actor-update": {...metrics...},
                 "actor-logprob": [floats], "ref-logprob": [floats],
                 "critic-update": {...metrics...}}, ...]}

Only the keys of the jobs that ran appear in a round. All numbers are plain
Python floats at full precision; two runs with the same seed, world size and
verl release give byte-identical files.  Rank 0 prints exactly one summary
line on stdout; verl's constructor banners ("Actor use_remove_padding=...")
are swallowed so that stdout stays that one line.

Process group
    Always a gloo process group. Outside torchrun the driver sets
    MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK=0, WORLD_SIZE=1,
    LOCAL_RANK=0 when absent.  Run torchrun with ``OMP_NUM_THREADS=1`` in the
    environment, or torchrun itself warns on stderr that it set it.

Models
    Wrapped in FSDP1 (``torch.distributed.fsdp.FullyShardedDataParallel``)
    on CPU over gloo, auto-wrapped per decoder layer with verl's own
    ``verl.utils.fsdp_utils.get_fsdp_wrap_policy`` (FULL_SHARD,
    ``use_orig_params=False``, as verl's fsdp_workers do), so verl's
    ``_optimizer_step`` takes its ``isinstance(module, FSDP)`` branch
    (``module.clip_grad_norm_``, a global norm over gloo).  One departure
    from fsdp_workers: ``sync_module_states=False``, because True raises on
    CPU ("ValueError: The module has CPU parameters or buffers when
    `sync_module_states=True`, which requires them to be on GPU. Please
    specify the `device_id` argument or move the module to GPU before passing
    it to FSDP."); every rank builds identical weights from one seed.  No
    FSDP ``MixedPrecision`` (parameters stay float32); verl's own
    ``torch.autocast(device_type="cpu", dtype=bfloat16)`` in
    ``_forward_micro_batch`` still applies.  ``--no-fsdp`` uses plain
    modules (verl's ``torch.nn.utils.clip_grad_norm_`` branch) instead;
    then ``"fsdp": false`` and, with world > 1, gradients are not averaged
    across ranks (each rank trains its own replica).

    Actor and reference: ``transformers.AutoModelForCausalLM.from_config`` on
    a tiny random ``LlamaConfig`` (vocab 96, hidden 32, 2 layers, 2 heads,
    intermediate 32, eager attention, float32), no download; the reference
    starts from the same weights as the actor.  Critic:
    ``AutoModelForTokenClassification.from_config`` with ``num_labels=1`` and
    ``classifier_dropout=0.0``, which is what verl's fsdp_workers build for a
    critic (``load_valuehead_model``): verl's ``dp_critic._forward_micro_batch``
    takes ``output.logits`` (bs, seq, 1), slices the response and squeezes
    the last dim, in every release driven here.

Config
    verl's own packaged trainer config (``verl/trainer/config/
    _generated_ppo_trainer.yaml`` where the release has it, else
    ``ppo_trainer.yaml``), loaded with OmegaConf, sections
    ``actor_rollout_ref.actor`` / ``actor_rollout_ref.ref`` / ``critic``
    resolved, then overridden with per-rank sizes the way fsdp_workers
    normalises them: ppo_mini_batch_size 6, ppo_micro_batch_size_per_gpu 2,
    log-prob micro batch 2, ppo_epochs 1, use_dynamic_bsz False,
    use_remove_padding False, use_fused_kernels False, use_torch_compile
    False, ulysses 1, grad_clip 1.0, clip_ratio 0.2, entropy_coeff 0,
    use_kl_loss False, loss_agg_mode token-mean.  Where the release has the
    dataclass ``verl.workers.config.FSDPActorConfig`` the actor config is
    converted with ``verl.utils.config.omega_conf_to_dataclass`` (as
    fsdp_workers do); the ref and critic stay DictConfigs (as fsdp_workers
    pass ``config.ref``; a ``CriticConfig`` dataclass would want a real model
    path for its ``HFModelConfig``).

Data
    Per rank and round: 18 sequences, prompt 4 (left padded), response 4
    (right padded, at least one valid token), in verl's ``DataProto`` with
    input_ids, attention_mask, position_ids, responses, response_mask,
    old_log_probs, advantages, ref_log_prob, values, returns, and meta_info
    temperature=1.0, micro_batch_size=2, use_dynamic_bsz=False,
    max_token_len, pad_token_id=0.  => 3 mini-batches x 3 micro-batches per
    update, 9 micro-batches per compute_log_prob.  Batches come from a
    ``torch.Generator`` seeded from (seed, rank, round); models from
    ``torch.manual_seed(seed)`` (same on every rank).
    ``torch.use_deterministic_algorithms(True)``, one intra-op thread.

Adaptations (no verl file is edited; each is a module attribute set here)
    * ``_get_current_mem_info`` of verl's GPUMemoryLogger module
      (``verl.utils.debug.performance`` in 0.4.x,
      ``verl.utils.profiler.performance`` in 0.5.x; 0.6+ already return
      zeros on CPU and are left alone): it calls
      ``torch.cpu.memory_allocated()``, which a CPU-only torch lacks
      (AttributeError inside every decorated update_policy /
      compute_log_prob / update_critic).  Replaced by a function returning
      "0.00" x4, which is what later verl releases do on CPU.  Only applied
      when the original raises.
    * ``sys.modules["rfc3987_syntax"] = None`` before importing verl: ray
      (imported by ``verl.protocol``) imports jsonschema, whose optional IRI
      format checker builds a Lark grammar at import (about 4 s per process
      here); jsonschema guards that import with ``suppress(ImportError)``.
      Pure start-up time, nothing of the code path driven here.
    * 0.4.x imports ``pkg_resources`` in ``verl/__init__``: the environment
      needs ``setuptools<81`` (an environment requirement, not a code change);
      its deprecation warning is filtered.
    * 0.6+ convert the actor config with hydra (``_target_``), so the
      environment needs ``hydra-core`` (a declared verl dependency; it pins
      omegaconf 2.3).  0.6.x also needs ``transformers<5``: its
      ``verl/utils/model.py`` does ``from transformers import
      AutoModelForVision2Seq``, gone in transformers 5.
    ``verl.utils.device.get_device_id()`` returns ``torch.cpu.current_device()``
    == "cpu" and ``get_device_name()`` "cpu" on a CPU-only torch, so the
    ``.to(get_device_id())`` calls need no adaptation.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import socket
import sys
import time
import warnings

JOB_ORDER = ("actor-update", "actor-logprob", "critic-update")

# sizes (per rank)
BATCH = 18
PROMPT_LEN = 4
RESPONSE_LEN = 4
MINI_BATCH = 6
MICRO_BATCH = 2
LOGPROB_MICRO_BATCH = 2
VOCAB = 96
PAD_ID = 0


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jobs", help="comma-separated subset of " + ",".join(JOB_ORDER))
    p.add_argument("--out", required=True, help="directory for numbers-rank{R}.json")
    p.add_argument("--updates", type=int, default=1, help="rounds (default 1)")
    p.add_argument("--pause", type=float, default=0.0, help="seconds to sleep between rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop", help="run until this file exists (--updates: the most rounds); progress lines per round")
    p.add_argument("--no-fsdp", action="store_true", help="plain modules instead of FSDP1")
    args = p.parse_args(argv)
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = [j for j in jobs if j not in JOB_ORDER]
    if unknown or not jobs:
        p.error(f"unknown or no jobs {unknown or args.jobs!r}; choose from {','.join(JOB_ORDER)}")
    if args.updates < 1:
        p.error("--updates must be >= 1")
    args.jobs = [j for j in JOB_ORDER if j in jobs]
    return args


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare_environment():
    """Environment that must be set before torch / verl are imported."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("VERL_LOGGING_LEVEL", "WARN")
    if "RANK" not in os.environ:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ["RANK"] = "0"
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("LOCAL_RANK", "0")
    # Start-up time only: see "Adaptations" in the module docstring.
    if "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None
    warnings.filterwarnings("ignore", message=r".*pkg_resources is deprecated.*")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=r".*FSDP.*")
    warnings.filterwarnings("ignore", message=r".*TypedStorage is deprecated.*")


def _plain(x):
    """Tensors / numpy / nested containers -> plain Python (full precision)."""
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        return _plain(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return _plain(x.item())
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return float(x)
    return x


# --------------------------------------------------------------------- config


def _verl_config_sections():
    """verl's own packaged trainer config, sections resolved to plain dicts."""
    import verl
    from omegaconf import OmegaConf

    cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    path = os.path.join(cfg_dir, "_generated_ppo_trainer.yaml")
    if not os.path.exists(path):
        path = os.path.join(cfg_dir, "ppo_trainer.yaml")
    root = OmegaConf.load(path)
    out = {}
    for key, sel in (("actor", "actor_rollout_ref.actor"), ("ref", "actor_rollout_ref.ref"), ("critic", "critic")):
        node = OmegaConf.select(root, sel)
        out[key] = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    return out


def _training():
    """What the actor's and the critic's configs share: per-rank sizes as fsdp_workers normalise them."""
    return {
        "strategy": "fsdp",
        "ppo_mini_batch_size": MINI_BATCH,
        "ppo_micro_batch_size": None,
        "ppo_micro_batch_size_per_gpu": MICRO_BATCH,
        "use_dynamic_bsz": False,
        "ppo_epochs": 1,
        "shuffle": False,
        "grad_clip": 1.0,
        "loss_agg_mode": "token-mean",
        "ulysses_sequence_parallel_size": 1,
    }


def _actor_overrides():
    return {
        **_training(),
        "clip_ratio": 0.2,
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "clip_ratio_c": 3.0,
        "entropy_coeff": 0.0,
        "use_kl_loss": False,
        "kl_loss_coef": 0.001,
        "kl_loss_type": "low_var_kl",
        "use_torch_compile": False,
        "entropy_from_logits_with_chunking": False,
        "entropy_checkpointing": False,
        # fsdp_workers add these two into the actor/ref config (open_dict)
        "use_remove_padding": False,
        "use_fused_kernels": False,
    }


def _build_configs():
    from omegaconf import OmegaConf

    sections = _verl_config_sections()

    actor = dict(sections["actor"])
    actor.update(_actor_overrides())
    actor.setdefault("policy_loss", {})
    if isinstance(actor["policy_loss"], dict):
        actor["policy_loss"]["loss_mode"] = "vanilla"
    if "rollout_n" in actor:
        actor["rollout_n"] = 1
    actor.setdefault("fsdp_config", {})
    actor_cfg = OmegaConf.create(actor)
    try:
        from verl.workers.config import FSDPActorConfig  # verl >= 0.5 / 0.6
    except ImportError:
        FSDPActorConfig = None
    if FSDPActorConfig is not None:
        from verl.utils.config import omega_conf_to_dataclass

        if "_target_" in actor_cfg:  # as fsdp_workers: hydra.utils.instantiate via _target_
            actor_cfg = omega_conf_to_dataclass(actor_cfg)
        else:
            actor_cfg = omega_conf_to_dataclass(actor_cfg, dataclass_type=FSDPActorConfig)

    ref = dict(sections["ref"])
    ref.update(
        {
            "log_prob_micro_batch_size": None,
            "log_prob_micro_batch_size_per_gpu": LOGPROB_MICRO_BATCH,
            "log_prob_use_dynamic_bsz": False,
            "use_torch_compile": False,
            "ulysses_sequence_parallel_size": 1,
            "entropy_from_logits_with_chunking": False,
            "entropy_checkpointing": False,
            "use_remove_padding": False,
            "use_fused_kernels": False,
        }
    )
    ref.setdefault("fsdp_config", {})
    ref_cfg = OmegaConf.create(ref)

    critic = dict(sections["critic"])
    critic.update(_training(), cliprange_value=0.5)
    model = dict(critic.get("model") or {})
    model["use_remove_padding"] = False
    critic["model"] = model
    critic_cfg = OmegaConf.create(critic)
    return actor_cfg, ref_cfg, critic_cfg


# --------------------------------------------------------------------- models


def _tiny_config(**extra):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        pad_token_id=PAD_ID,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
        **extra,
    )


def _causal_lm(seed):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_tiny_config(), attn_implementation="eager")
    return model.to(torch.float32)


def _value_model(seed):
    import torch
    from transformers import AutoModelForTokenClassification

    torch.manual_seed(seed)
    cfg = _tiny_config(num_labels=1, classifier_dropout=0.0)
    model = AutoModelForTokenClassification.from_config(cfg, attn_implementation="eager")
    return model.to(torch.float32)


def _wrap(module, use_fsdp):
    if not use_fsdp:
        return module
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    from verl.utils.fsdp_utils import get_fsdp_wrap_policy

    policy = get_fsdp_wrap_policy(module, config={"min_num_params": 0})
    return FSDP(
        module,
        auto_wrap_policy=policy,
        use_orig_params=False,
        device_id=torch.device("cpu"),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        # True raises on CPU ("The module has CPU parameters or buffers when
        # `sync_module_states=True`, which requires them to be on GPU"); every
        # rank builds identical weights from the same seed instead.
        sync_module_states=False,
        forward_prefetch=False,
    )


def _optimizer(module):
    import torch

    return torch.optim.AdamW(module.parameters(), lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01)


def _quiet_construct(fn, *a, **kw):
    """verl's constructors print banners on stdout; keep stdout to one line."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*a, **kw)


# --------------------------------------------------------------------- data


def _make_batch(seed, rank, rnd):
    import torch
    from verl import DataProto

    g = torch.Generator().manual_seed(seed * 1_000_003 + rank * 10_007 + rnd * 101 + 17)
    b, p, r = BATCH, PROMPT_LEN, RESPONSE_LEN
    prompt_len = torch.randint(1, p + 1, (b,), generator=g)
    resp_len = torch.randint(1, r + 1, (b,), generator=g)
    prompt_mask = (torch.arange(p).unsqueeze(0) >= (p - prompt_len).unsqueeze(1)).long()  # left pad
    resp_mask = (torch.arange(r).unsqueeze(0) < resp_len.unsqueeze(1)).long()  # right pad
    attention_mask = torch.cat([prompt_mask, resp_mask], dim=1)
    tokens = torch.randint(3, VOCAB, (b, p + r), generator=g)
    input_ids = torch.where(attention_mask.bool(), tokens, torch.full_like(tokens, PAD_ID))
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    responses = input_ids[:, p:].clone()
    response_mask = attention_mask[:, p:].clone()
    fmask = response_mask.float()
    old_log_probs = (-torch.rand(b, r, generator=g) * 3.0 - 2.5) * fmask
    ref_log_prob = (-torch.rand(b, r, generator=g) * 3.0 - 2.5) * fmask
    advantages = torch.randn(b, r, generator=g) * fmask
    values = torch.randn(b, r, generator=g) * 0.1 * fmask
    returns = torch.randn(b, r, generator=g) * fmask
    tensors = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "responses": responses,
        "response_mask": response_mask,
        "old_log_probs": old_log_probs,
        "ref_log_prob": ref_log_prob,
        "advantages": advantages,
        "values": values,
        "returns": returns,
    }

    def proto(meta):
        return DataProto.from_dict(tensors={k: v.clone() for k, v in tensors.items()}, meta_info=dict(meta))

    return proto


def _update_meta():
    return {"temperature": 1.0, "pad_token_id": PAD_ID, "global_token_num": []}


def _logprob_meta():
    return {
        "temperature": 1.0,
        "micro_batch_size": LOGPROB_MICRO_BATCH,
        "use_dynamic_bsz": False,
        "max_token_len": 16384,
        "pad_token_id": PAD_ID,
    }


def _log_probs(result):
    # 0.4.x: (log_probs, entropys); 0.6+/0.7: {"log_probs": ..., ...}
    if isinstance(result, dict):
        return result["log_probs"]
    if isinstance(result, (tuple, list)):
        return result[0]
    return result


# --------------------------------------------------------------------- adaptations


def _adapt_memory_logger():
    """0.4.x GPUMemoryLogger calls torch.cpu.memory_allocated(); see docstring."""
    import importlib

    for name in ("verl.utils.debug.performance", "verl.utils.profiler.performance"):
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        fn = getattr(mod, "_get_current_mem_info", None)
        if fn is None:
            continue
        try:
            fn()
        except AttributeError:
            mod._get_current_mem_info = lambda unit="GB", precision=2: ("0.00", "0.00", "0.00", "0.00")


# --------------------------------------------------------------------- main


def _stop_agreed(path):
    """Whether any rank sees ``path``: every rank gets the same answer, so all stop after the same round."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if os.path.exists(path) else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main(argv=None):
    args = _parse_args(argv)
    _prepare_environment()
    t0 = time.perf_counter()

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    import transformers

    transformers.logging.set_verbosity_error()
    with contextlib.suppress(Exception):
        transformers.logging.disable_progress_bar()

    import verl
    from verl import DataProto  # noqa: F401  (verl's own protocol)
    from verl.workers.actor.dp_actor import DataParallelPPOActor
    from verl.workers.critic.dp_critic import DataParallelPPOCritic

    for name in ("verl", "torch.distributed", "torch.distributed.fsdp", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    _adapt_memory_logger()
    t_import = time.perf_counter() - t0

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    use_fsdp = not args.no_fsdp
    jobs = args.jobs

    with warnings.catch_warnings():  # 0.6.x: "Torch profiler tool config is not fully supported now."
        warnings.simplefilter("ignore")
        actor_cfg, ref_cfg, critic_cfg = _build_configs()

    t1 = time.perf_counter()
    actor = ref = critic = None
    if "actor-update" in jobs or "actor-logprob" in jobs:
        module = _wrap(_causal_lm(args.seed), use_fsdp)
        actor = _quiet_construct(DataParallelPPOActor, config=actor_cfg, actor_module=module, actor_optimizer=_optimizer(module))
    if "actor-logprob" in jobs:
        ref_module = _wrap(_causal_lm(args.seed), use_fsdp)  # same initial weights as the actor
        ref = _quiet_construct(DataParallelPPOActor, config=ref_cfg, actor_module=ref_module)
    if "critic-update" in jobs:
        cmodule = _wrap(_value_model(args.seed + 1), use_fsdp)
        critic = _quiet_construct(DataParallelPPOCritic, config=critic_cfg, critic_module=cmodule, critic_optimizer=_optimizer(cmodule))
    t_build = time.perf_counter() - t1
    # Models share one seed on every rank (identical replicas; FSDP's
    # sync_module_states cannot run on CPU); anything else that draws from the
    # global RNG from here on gets a per-rank seed.  Batches use their own
    # generator (see _make_batch).
    torch.manual_seed(args.seed + 7919 * rank)

    t2 = time.perf_counter()
    rounds = []
    os.makedirs(args.out, exist_ok=True)
    for rnd in range(args.updates):
        if rnd and args.pause > 0:
            time.sleep(args.pause)
        if rnd and args.stop and _stop_agreed(args.stop):
            break
        make = _make_batch(args.seed, rank, rnd)
        out = {}
        if "actor-update" in jobs:
            out["actor-update"] = _plain(actor.update_policy(make(_update_meta())))
        if "actor-logprob" in jobs:
            lp = _log_probs(actor.compute_log_prob(make(_logprob_meta()), calculate_entropy=False))
            out["actor-logprob"] = _plain(lp.reshape(-1))
            lp = _log_probs(ref.compute_log_prob(make(_logprob_meta()), calculate_entropy=False))
            out["ref-logprob"] = _plain(lp.reshape(-1))
        if "critic-update" in jobs:
            out["critic-update"] = _plain(critic.update_critic(make(_update_meta())))
        rounds.append(out)
        if args.stop:
            with open(os.path.join(args.out, f"progress-rank{rank}.jsonl"), "a") as fh:
                fh.write(json.dumps({"round": rnd, "pid": os.getpid()}) + "\n")
    t_compute = time.perf_counter() - t2

    result = {"verl": str(verl.__version__), "world": world, "fsdp": use_fsdp, "rounds": rounds}
    path = os.path.join(args.out, f"numbers-rank{rank}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)

    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(
            f"verl-drive: {verl.__version__} world={world} fsdp={use_fsdp} rounds={len(rounds)} "
            f"jobs={','.join(jobs)} import={t_import:.1f}s build={t_build:.1f}s compute={t_compute:.1f}s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
