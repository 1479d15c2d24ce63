"""An inference-style engine, for ``patchkit attach PID --auto``: a ``while`` loop that schedules a batch, runs one
forward of the model under ``torch.no_grad()`` and samples from its logits.  Started without patchkit::

    python tests/auto_engine_job.py --journal FILE --stop FILE [--steps N] [--seed S]

The step --auto should find: one iteration of the ``while`` loop in :meth:`Engine.run` (one forward of the model).
Label for the trace checks: ``job-forward``, once per forward, inside :meth:`Model.forward`.  One journal line per
forward: ``{"step": i, "out": float}``.
"""

import torch

import auto_common

VOCAB, WIDTH, HIDDEN, LAYERS = 4096, 512, 2048, 3
ROWS, CONTEXT = 16, 32  # requests per batch, tokens of each


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, HIDDEN),
                                                              torch.nn.GELU(), torch.nn.Linear(HIDDEN, WIDTH))
                                          for _ in range(LAYERS))
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        with torch.profiler.record_function("job-forward"):
            x = self.embed(tokens)
            for block in self.blocks:
                x = x + block(x)
            return self.head(x[:, -1])


class Engine:
    """Requests wait in a queue; each round takes a batch of them, runs the model once and appends one sampled
    token to each."""

    def __init__(self, model, journal, seed):
        self.model, self.journal = model, journal
        gen = torch.Generator().manual_seed(seed)
        self.queue = [torch.randint(0, VOCAB, (CONTEXT,), generator=gen).tolist() for _ in range(4 * ROWS)]
        self.stopped = False

    def schedule(self):
        """The next batch: the ``ROWS`` requests at the head of the queue, each cut to its last ``CONTEXT``
        tokens."""
        taken, self.queue = self.queue[:ROWS], self.queue[ROWS:]
        self.queue.extend(taken)
        return torch.tensor([request[-CONTEXT:] for request in taken])

    def sample(self, logits):
        """The likeliest next token of each request, appended to it; the mean logit of the batch."""
        chosen = logits.argmax(-1).tolist()
        for request, token in zip(self.queue[-ROWS:], chosen):
            request.append(token)
        return logits.mean().item()

    def run(self):
        while not self.stopped:
            batch = self.schedule()
            with torch.no_grad():
                logits = self.model(batch)
            out = self.sample(logits)
            self.stopped = not self.journal.step(out)


def main():
    args = auto_common.parse(__doc__)
    auto_common.deterministic(args.seed)
    model = Model().eval()
    journal = auto_common.Journal(args, value="out")
    with journal.running(args):
        Engine(model, journal, args.seed).run()
    journal.close()


if __name__ == "__main__":
    main()
