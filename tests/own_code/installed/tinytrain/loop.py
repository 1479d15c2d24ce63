"""The training loop: a trainer that walks its batches, and an evaluation function."""


class Trainer:
    """Fits a one-number model by averaging; enough to have loops and calls."""

    def __init__(self, lr=0.5):
        self.lr = lr
        self.weight = 0.0
        self.seen = 0

    def forward(self, batch):
        return sum(batch) / len(batch) - self.weight

    def update(self, error):
        self.weight += self.lr * error

    def fit(self, batches, epochs=1):
        history = []
        for epoch in range(epochs):
            for batch in batches:
                if not batch:
                    continue
                error = self.forward(batch)
                self.update(error)
                self.seen += 1
            history.append(self.weight)
        return history


def evaluate(trainer, batches):
    total = 0.0
    for batch in batches:
        total += abs(trainer.forward(batch))
    return total / max(len(batches), 1)
