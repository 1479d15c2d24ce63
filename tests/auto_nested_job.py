"""A job's own trainer with nested loops, for ``patchkit attach PID --auto``: epochs, mini-batches (one optimizer
step each) and gradient accumulation over micro-batches, each micro-batch's forward and backward in the module-level
:func:`micro_step`.  Started without patchkit::

    python tests/auto_nested_job.py --journal FILE --stop FILE [--steps N] [--accum K] [--seed S]

The step --auto should find: one iteration of ``for batch in loader:`` in :func:`train` (an optimizer step), not an
epoch, not a micro-batch.  Labels for the trace checks: ``job-forward`` and ``job-backward`` once per micro-batch,
``job-optimizer`` once per step.
"""

import time

import torch

import auto_common

WIDTH, HIDDEN, LAYERS = 512, 2048, 2
MICRO = 96  # rows of one micro-batch
BATCHES = 6  # mini-batches (optimizer steps) per epoch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.GELU(),
                                                              torch.nn.Linear(HIDDEN, WIDTH)) for _ in range(LAYERS))
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x).squeeze(-1)


class Loader:
    """Mini-batches of ``accum`` micro-batches each, the same every epoch; a little time reading each."""

    def __init__(self, seed, accum):
        self.seed, self.rows = seed, MICRO * accum

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(BATCHES):
            time.sleep(0.002)  # reading from storage
            x = torch.randn(self.rows, WIDTH, generator=gen)
            yield x, x[:, :8].sum(-1)


def chunks(batch, k):
    x, y = batch
    return zip(x.chunk(k), y.chunk(k))


def micro_step(model, micro):
    """Forward and backward of one micro-batch (its gradient added to the others'); its loss."""
    x, y = micro
    with torch.profiler.record_function("job-forward"):
        loss = torch.nn.functional.mse_loss(model(x), y)
    with torch.profiler.record_function("job-backward"):
        loss.backward()
    return loss.item()


def train(model, optimizer, loader, epochs, accum, on_step):
    """``epochs`` passes over ``loader``, one optimizer step per mini-batch; ``on_step(loss)`` after each, which
    returns False to stop."""
    for epoch in range(epochs):
        for batch in loader:
            loss = 0.0
            for micro in chunks(batch, accum):
                loss += micro_step(model, micro) / accum
            with torch.profiler.record_function("job-optimizer"):
                optimizer.step()
                optimizer.zero_grad()
            if not on_step(loss):
                return


def build(seed, accum):
    """The model, its optimizer and the loader, seeded."""
    auto_common.deterministic(seed)
    model = Model()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), Loader(seed, accum)


def main():
    args = auto_common.parse(__doc__, accum=2)
    model, optimizer, loader = build(args.seed, args.accum)
    journal = auto_common.Journal(args)
    epochs = -(-args.steps // BATCHES)
    with journal.running(args):
        train(model, optimizer, loader, epochs, args.accum, journal.step)
    journal.close()


if __name__ == "__main__":
    main()
