"""A training job started without patchkit, for the attach tests and bench/attach.py.

Trains pkjob's Trainer (tests/attach_helpers.py writes it) on CPU, one JSON line per step (its index,
start and end time, the main thread's CPU time, loss) in --journal, until --steps or until the --stop file appears; then a last line with the number
of steps, whether each target function has its original code object and whether a name of patchkit's is
left in the module.  Under torchrun each rank logs to --journal.<rank> and the ranks stop together.
"""

import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("logged", "wrapped", "closure"), default="logged")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--pause", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--journal", required=True)
    ap.add_argument("--stop", required=True)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo")
    from pkjob import train

    trainer = train.Trainer(args.seed, args.pause)
    log = open(args.journal if world == 1 else f"{args.journal}.{rank}", "a")

    def stop():
        flag = torch.tensor([1.0 if os.path.exists(args.stop) else 0.0])
        if world > 1:
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return bool(flag.item())

    def one(i, fn):
        t0, c0 = time.time(), time.thread_time()
        fn(i)
        log.write(json.dumps({"step": i, "start": t0, "end": time.time(), "cpu": time.thread_time() - c0,
                              "loss": trainer.losses[-1]}) + "\n")
        log.flush()
        return not stop()

    if args.mode == "closure":
        def on_step(i, step):
            return one(i, step)

        train.closure_loop(trainer, args.steps, on_step)
        originals = {"closure_loop.step": (on_step.function, on_step.code)}
    else:
        method = getattr(train.Trainer, f"step_{args.mode}")
        inner = method.__wrapped__ if args.mode == "wrapped" else method.__closure__[0].cell_contents
        originals = {f"Trainer.step_{args.mode}": (inner, inner.__code__)}
        i = 0
        while i < args.steps and one(i, getattr(trainer, f"step_{args.mode}")):
            i += 1
    final = {"final": True, "steps": len(trainer.losses), "losses": trainer.losses,
             "original": {name: fn.__code__ is code for name, (fn, code) in originals.items()},
             "left": sorted(n for n in vars(train) if "patchkit" in n)}
    log.write(json.dumps(final) + "\n")
    log.close()
    if world > 1:  # ranks that tear gloo down apart had one abort in about 8 runs ("terminate called without
        torch.distributed.barrier()  # an active exception", exit -6): they leave together
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
