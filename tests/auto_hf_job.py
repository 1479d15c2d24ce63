"""A Hugging Face ``transformers.Trainer`` job, for ``patchkit attach PID --auto``: a tiny GPT-2 built from its
config, trained on CPU on random tokens with two micro-batches per optimizer step.  Started without patchkit, with
tests/frameworksenv.py's packages first on PYTHONPATH::

    python tests/auto_hf_job.py --journal FILE --stop FILE [--steps N] [--seed S]

The step --auto should find: one optimizer step of transformers' own training loop (``Trainer._inner_training_loop``;
two ``Trainer.training_step`` calls in it).  No label of the job's in it: the trace checks count torch's
``Optimizer.step#`` events.  A callback journals each optimizer step's loss (as the Trainer logs it) and stops the
training when the stop file appears.
"""

import tempfile

import auto_common

VOCAB, POSITIONS, WIDTH, LAYERS, HEADS = 1024, 40, 256, 2, 4
MICRO, ACCUM = 4, 2  # sequences per micro-batch, micro-batches per optimizer step


def dataset(seed, size):
    import torch

    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (size, POSITIONS), generator=gen)
    return [{"input_ids": row, "labels": row} for row in tokens]


def main():
    args = auto_common.parse(__doc__)
    auto_common.quiet()
    auto_common.deterministic(args.seed)
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    auto_common.quiet_loggers()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    journal = auto_common.Journal(args)

    class Journaling(TrainerCallback):
        def on_log(self, targs, state, control, logs=None, **kwargs):
            if logs and "loss" in logs and not journal.step(logs["loss"]):
                control.should_training_stop = True

    config = GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS)
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(output_dir=out, use_cpu=True, report_to=[], save_strategy="no", logging_steps=1,
                                  max_steps=args.steps, per_device_train_batch_size=MICRO,
                                  gradient_accumulation_steps=ACCUM, dataloader_num_workers=0, disable_tqdm=True,
                                  seed=args.seed, data_seed=args.seed, learning_rate=1e-4)
        trainer = Trainer(model=model, args=targs, train_dataset=dataset(args.seed, MICRO * ACCUM * 16),
                          callbacks=[Journaling()])
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # it prints each log on stdout
        with journal.running(args):
            trainer.train()
    journal.close()


if __name__ == "__main__":
    main()
