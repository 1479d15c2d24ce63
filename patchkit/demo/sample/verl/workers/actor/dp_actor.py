# patchkit demo sample (not verl): shaped like verl 0.6.1's
# verl/workers/actor/dp_actor.py so that verl recipes apply to it, but it
# trains a tiny MLP policy on CPU with plain torch.
"""
Single Process Actor
"""

import logging
import os

import torch
import torch.nn.functional as F

from verl import DataProto
from verl.workers.actor import BasePPOActor

__all__ = ["DataParallelPPOActor"]

logger = logging.getLogger(__file__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))


def GPUMemoryLogger(role, logger=None):
    """verl logs device memory around these methods; here it only keeps the decorator in place."""

    def decorator(func):
        return func

    return decorator


def append_to_dict(data, new_data):
    for key, val in new_data.items():
        data.setdefault(key, []).append(val)


def logprobs_from_logits(logits, labels):
    logp = F.log_softmax(logits, dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits):
    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum().clamp(min=1)


def compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, cliprange):
    """PPO clipped surrogate objective."""
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    pg_loss = masked_mean(torch.maximum(pg_losses, pg_losses2), response_mask)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses).float(), response_mask)
    return pg_loss, pg_clipfrac, ppo_kl


def kl_penalty(logprob, ref_logprob):
    """The low-variance KL estimator verl calls "low_var_kl"."""
    kl = (ref_logprob - logprob).clamp(-20, 20)
    return (torch.exp(kl) - kl - 1).clamp(-10, 10)


class DataParallelPPOActor(BasePPOActor):
    def __init__(self, config, actor_module, actor_optimizer=None):
        """When optimizer is None, it is Reference Policy"""
        super().__init__(config)
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.device_name = "cpu"

    def _forward_micro_batch(self, micro_batch, temperature, calculate_entropy=False):
        """
        Returns:
            entropy: # (bs, response_len)
            log_probs: # (bs, response_len)
        """
        response_length = micro_batch["responses"].size(-1)
        input_ids = micro_batch["input_ids"]
        logits = self.actor_module(input_ids)  # (bs, seqlen, vocab)
        logits = logits / temperature
        logits = logits[:, -response_length - 1 : -1, :]  # (bs, response_length, vocab)
        log_probs = logprobs_from_logits(logits, micro_batch["responses"])
        entropy = entropy_from_logits(logits) if calculate_entropy else None
        return entropy, log_probs

    def _optimizer_step(self):
        assert self.config.grad_clip is not None
        grad_norm = torch.nn.utils.clip_grad_norm_(self.actor_module.parameters(), max_norm=self.config.grad_clip)
        # if grad_norm is not finite, skip the update
        if not torch.isfinite(grad_norm):
            print(f"WARN: grad_norm is not finite: {grad_norm}")
            self.actor_optimizer.zero_grad()
        else:
            self.actor_optimizer.step()
        return grad_norm

    @GPUMemoryLogger(role="dp actor", logger=logger)
    def compute_log_prob(self, data: DataProto, calculate_entropy=False) -> torch.Tensor:
        """Compute the log probability of the responses given input_ids

        Returns:
            torch.Tensor: the log_prob tensor
        """
        # set to eval
        self.actor_module.eval()

        micro_batch_size = data.meta_info["micro_batch_size"]
        temperature = data.meta_info["temperature"]  # temperature must be in the data.meta_info to avoid silent error

        select_keys = ["responses", "input_ids", "attention_mask", "position_ids"]
        batch = data.select(batch_keys=select_keys).batch
        micro_batches = batch.split(micro_batch_size)

        log_probs_lst = []
        entropy_lst = []
        for micro_batch in micro_batches:
            with torch.no_grad():
                entropy, log_probs = self._forward_micro_batch(
                    micro_batch, temperature=temperature, calculate_entropy=calculate_entropy
                )
            log_probs_lst.append(log_probs)
            if calculate_entropy:
                entropy_lst.append(entropy)

        log_probs = torch.concat(log_probs_lst, dim=0)
        entropys = None
        if calculate_entropy:
            entropys = torch.concat(entropy_lst, dim=0)
        return log_probs, entropys

    @GPUMemoryLogger(role="dp actor", logger=logger)
    def update_policy(self, data: DataProto):
        # make sure we are in training mode
        self.actor_module.train()

        temperature = data.meta_info["temperature"]  # temperature must be in the data.meta_info to avoid silent error

        select_keys = ["responses", "input_ids", "attention_mask", "position_ids", "old_log_probs", "advantages"]
        if self.config.use_kl_loss:
            select_keys.append("ref_log_prob")
        data = data.select(batch_keys=select_keys)

        # Split to make minibatch iterator for updating the actor
        # See PPO paper for details. https://arxiv.org/abs/1707.06347
        mini_batches = data.split(self.config.ppo_mini_batch_size)

        metrics = {}
        for _ in range(self.config.ppo_epochs):
            for batch_idx, mini_batch in enumerate(mini_batches):
                self.gradient_accumulation = self.config.ppo_mini_batch_size // self.config.ppo_micro_batch_size_per_gpu
                micro_batches = mini_batch.batch.split(self.config.ppo_micro_batch_size_per_gpu)

                self.actor_optimizer.zero_grad()

                for micro_batch in micro_batches:
                    micro_batch_metrics = {}
                    model_inputs = {**micro_batch}
                    response_length = model_inputs["responses"].size(1)
                    response_mask = model_inputs["attention_mask"][:, -response_length:].float()
                    old_log_prob = model_inputs["old_log_probs"]
                    advantages = model_inputs["advantages"]

                    entropy_coeff = self.config.entropy_coeff
                    calculate_entropy = entropy_coeff != 0
                    entropy, log_prob = self._forward_micro_batch(
                        model_inputs, temperature=temperature, calculate_entropy=calculate_entropy
                    )

                    pg_loss, pg_clipfrac, ppo_kl = compute_policy_loss(
                        old_log_prob=old_log_prob,
                        log_prob=log_prob,
                        advantages=advantages,
                        response_mask=response_mask,
                        cliprange=self.config.clip_ratio,
                    )

                    policy_loss = pg_loss
                    if calculate_entropy:
                        policy_loss = policy_loss - masked_mean(entropy, response_mask) * entropy_coeff

                    if self.config.use_kl_loss:
                        ref_log_prob = model_inputs["ref_log_prob"]
                        kl_loss = masked_mean(kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob), response_mask)
                        policy_loss = policy_loss + kl_loss * self.config.kl_loss_coef
                        micro_batch_metrics["actor/kl_loss"] = kl_loss.detach().item()

                    loss = policy_loss / self.gradient_accumulation
                    loss.backward()

                    micro_batch_metrics.update(
                        {
                            "actor/pg_loss": pg_loss.detach().item(),
                            "actor/pg_clipfrac": pg_clipfrac.detach().item(),
                            "actor/ppo_kl": ppo_kl.detach().item(),
                        }
                    )
                    append_to_dict(metrics, micro_batch_metrics)

                grad_norm = self._optimizer_step()
                mini_batch_metrics = {"actor/grad_norm": grad_norm.detach().item()}
                append_to_dict(metrics, mini_batch_metrics)
        self.actor_optimizer.zero_grad()
        return metrics
