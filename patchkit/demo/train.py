"""Train the demo sample's verl-shaped actor for a few PPO updates on CPU.

Run with the sample tree first on ``sys.path`` (it provides ``verl``)::

    PYTHONPATH=path/to/patchkit/demo/sample python -m patchkit.demo.train --updates 4

Each update does what verl's FSDP worker does with the actor and the
reference policy in one process: ``compute_log_prob`` on the actor (old log
probs) and on the reference model (``actor_optimizer`` is None), then
``update_policy`` over 2 mini-batches of 2 micro-batches.  A tiny MLP policy,
real forward / backward / AdamW steps, a few seconds on CPU.  Prints one
summary line; if the sample was patched, also what patchkit captured.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

VOCAB, PROMPT, RESPONSE = 32, 6, 6
BATCH, MINI, MICRO = 8, 4, 2  # 2 mini-batches x 2 micro-batches per update


class Config(dict):
    """verl passes an OmegaConf DictConfig: attribute access plus .get()."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def build_policy(torch):
    class TinyPolicy(torch.nn.Module):
        """Embedding + MLP: next-token logits from each position."""

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 16)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, VOCAB))

        def forward(self, input_ids):
            return self.mlp(self.embed(input_ids))

    return TinyPolicy()


def make_batch(torch, DataProto, gen):
    seq = PROMPT + RESPONSE
    input_ids = torch.randint(0, VOCAB, (BATCH, seq), generator=gen)
    return DataProto(
        {
            "input_ids": input_ids,
            "responses": input_ids[:, PROMPT:],
            "attention_mask": torch.ones(BATCH, seq, dtype=torch.long),
            "position_ids": torch.arange(seq).expand(BATCH, seq).clone(),
        },
        meta_info={"micro_batch_size": MINI, "temperature": 1.0},
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchkit.demo.train", description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=4, help="PPO updates to run (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    try:
        from verl import DataProto
        from verl.workers.actor.dp_actor import DataParallelPPOActor
    except ImportError as exc:
        print(f"patchkit demo: cannot import the sample's verl ({exc}); put patchkit/demo/sample first on "
              "PYTHONPATH", file=sys.stderr)
        return 2
    import torch

    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    config = Config(ppo_epochs=1, ppo_mini_batch_size=MINI, ppo_micro_batch_size_per_gpu=MICRO, grad_clip=1.0,
                    clip_ratio=0.2, entropy_coeff=0.0, use_kl_loss=True, kl_loss_coef=0.01)
    policy = build_policy(torch)
    ref_policy = copy.deepcopy(policy)
    actor = DataParallelPPOActor(config, policy, torch.optim.AdamW(policy.parameters(), lr=1e-2))
    ref = DataParallelPPOActor(config, ref_policy, actor_optimizer=None)  # the reference policy

    losses, kls = [], []
    for _ in range(args.updates):
        data = make_batch(torch, DataProto, gen)
        old_log_probs, _ = actor.compute_log_prob(data)
        ref_log_prob, _ = ref.compute_log_prob(data, calculate_entropy=True)
        # reward: how often the response repeats the token before it; group-normalised advantages
        reward = (data.batch["responses"][:, 1:] == data.batch["responses"][:, :-1]).float().mean(-1)
        adv = ((reward - reward.mean()) / (reward.std() + 1e-6)).unsqueeze(-1).expand(-1, RESPONSE).contiguous()
        data.batch.update(old_log_probs=old_log_probs, ref_log_prob=ref_log_prob, advantages=adv)
        metrics = actor.update_policy(data)
        losses.append(sum(metrics["actor/pg_loss"]) / len(metrics["actor/pg_loss"]))
        kls.append(sum(metrics["actor/kl_loss"]) / len(metrics["actor/kl_loss"]))

    elapsed = time.perf_counter() - t0
    if losses:
        print(f"demo: {args.updates} updates x {BATCH // MINI} mini-batches x {MINI // MICRO} micro-batches, "
              f"actor and ref compute_log_prob each update; pg_loss {losses[0]:+.4f} -> {losses[-1]:+.4f}, "
              f"kl {kls[-1]:.5f}, {elapsed:.2f}s")
    else:
        print(f"demo: 0 updates, {elapsed:.2f}s")
    runtime = sys.modules.get("patchkit.runtime")
    if runtime is not None:
        for r in runtime.report():
            spans = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in r["recorded"]) or "none yet"
            print(f"demo: patchkit {r['key']}: {r['state']}, recorded steps {spans}; "
                  f"traces: {', '.join(r['traces']) or 'none yet'}" + (f"; error: {r['error']}" if r["error"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
