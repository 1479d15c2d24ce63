"""patchkit demo sample: verl.workers.actor (stand-in)."""

from abc import ABC, abstractmethod


class BasePPOActor(ABC):
    def __init__(self, config):
        self.config = config

    @abstractmethod
    def compute_log_prob(self, data, calculate_entropy=False):
        """Log-probabilities of the responses in ``data``."""

    @abstractmethod
    def update_policy(self, data):
        """One PPO update over ``data``; returns metrics."""
