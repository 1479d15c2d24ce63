"""patchkit demo sample: a stand-in for the ``verl`` package (not verl).

Just enough of verl 0.6.1's shape for ``patchkit demo``: ``DataProto`` with a
tensor batch and ``meta_info``, and ``verl.workers.actor.dp_actor`` with
``DataParallelPPOActor``.  Everything runs on CPU with plain torch.
"""

__version__ = "0.6.1"


class TensorBatch(dict):
    """A dict of tensors sharing their first dimension (a small TensorDict)."""

    @property
    def batch_size(self):
        return (len(next(iter(self.values()))),)

    def split(self, size):
        n = self.batch_size[0]
        return [TensorBatch({k: v[i:i + size] for k, v in self.items()}) for i in range(0, n, size)]


class DataProto:
    """Tensors in ``batch``, everything else in ``meta_info``."""

    def __init__(self, batch, meta_info=None):
        self.batch = TensorBatch(batch)
        self.meta_info = dict(meta_info or {})
        self.non_tensor_batch = {}

    def select(self, batch_keys):
        return DataProto({k: self.batch[k] for k in batch_keys}, self.meta_info)

    def split(self, size):
        return [DataProto(b, self.meta_info) for b in self.batch.split(size)]

    def __len__(self):
        return self.batch.batch_size[0]
