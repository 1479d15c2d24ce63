"""A PyTorch Lightning 2.x job, for ``patchkit attach PID --auto``: a ``LightningModule`` with ``training_step`` and
``configure_optimizers``, trained on CPU by ``lightning.Trainer`` with two micro-batches per optimizer step.  Started
without patchkit, with tests/frameworksenv.py's packages first on PYTHONPATH::

    python tests/auto_lightning_job.py --journal FILE --stop FILE [--steps N] [--seed S]

The step --auto should find: one optimizer step of Lightning's own loop (two ``training_step`` calls, one
``optimizer.step``).  The module labels its forward ``job-forward`` (in :meth:`Regression.training_step`); the trace
checks count torch's ``Optimizer.step#`` events for the optimizer.  A callback journals each optimizer step's loss
(the mean of its micro-batches') and stops the training (``trainer.should_stop``) when the stop file appears.
"""

import time

import auto_common

WIDTH, HIDDEN, LAYERS = 512, 2048, 2
MICRO, ACCUM = 96, 2  # rows per micro-batch, micro-batches per optimizer step


def main():
    args = auto_common.parse(__doc__)
    auto_common.quiet()
    auto_common.deterministic(args.seed)
    import lightning
    import torch

    auto_common.quiet_loggers()
    journal = auto_common.Journal(args)

    class Regression(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.GELU(),
                                                                  torch.nn.Linear(HIDDEN, WIDTH))
                                              for _ in range(LAYERS))
            self.head = torch.nn.Linear(WIDTH, 1)
            self.micro_losses = []

        def forward(self, x):
            for block in self.blocks:
                x = x + block(x)
            return self.head(x).squeeze(-1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            with torch.profiler.record_function("job-forward"):
                loss = torch.nn.functional.mse_loss(self(x), y)
            self.micro_losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Journaling(lightning.Callback):
        def __init__(self):
            self.seen = 0

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if trainer.global_step == self.seen:  # a micro-batch whose gradient waits for the next one
                return
            self.seen = trainer.global_step
            loss = sum(module.micro_losses) / len(module.micro_losses)
            module.micro_losses.clear()
            if not journal.step(loss):
                trainer.should_stop = True

    class Reading(torch.utils.data.Dataset):
        """Rows of a seeded table, a little time reading each micro-batch."""

        def __init__(self):
            gen = torch.Generator().manual_seed(args.seed)
            self.x = torch.randn(MICRO * ACCUM * 8, WIDTH, generator=gen)
            self.y = self.x[:, :8].sum(-1)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            if i % MICRO == 0:
                time.sleep(0.002)  # reading from storage
            return self.x[i], self.y[i]

    loader = torch.utils.data.DataLoader(Reading(), batch_size=MICRO, shuffle=False, num_workers=0)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, max_steps=args.steps, max_epochs=-1,
                                accumulate_grad_batches=ACCUM, enable_progress_bar=False, logger=False,
                                enable_checkpointing=False, enable_model_summary=False, callbacks=[Journaling()],
                                num_sanity_val_steps=0, deterministic=True, default_root_dir=None)
    with journal.running(args):
        trainer.fit(Regression(), loader)
    journal.close()


if __name__ == "__main__":
    main()
