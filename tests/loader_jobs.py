"""Training loops over ``Artifact.batches`` that the loader's integration tests run as processes.

    python -m tests.loader_jobs dist  JOB.json   # one rank of a torch.distributed (gloo) job
    python -m tests.loader_jobs train JOB.json   # one process with a checkpoint after every batch

``dist``: every batch is a step all ranks join (an ``all_reduce``: a rank with more batches than
another would wait there for ever, until gloo's timeout); after each epoch the ranks' row ids go to
rank 0 (``all_gather_object``), which writes them to ``out``. With ``stop_at`` ``[epoch, k]`` every rank
stops after batch ``k`` of that epoch and writes its ``state_dict()`` to ``state``; with ``resume`` every
rank starts from rank 0's saved state.

``train``: after every batch the batch's row ids are appended to ``log`` (the step's effect) and a
checkpoint (the loader's state and the log's length) replaces ``checkpoint`` atomically; a restarted
process truncates the log to the checkpoint's length and resumes the loader from its state, so a kill
anywhere loses at most the step the checkpoint did not record, and that step is redone.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time


def loader_for(job: dict, rank: int, world_size: int):
    from prepflow import Artifact

    return Artifact.open(job["artifact"]).batches("train", rank=rank, world_size=world_size, channels=["__row__"],
                                                  **job["loader"])


def dist(job: dict) -> None:
    import torch
    import torch.distributed as tdist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{job['port']}", rank=rank, world_size=world,
                             timeout=datetime.timedelta(seconds=job.get("timeout", 60)))
    loader = loader_for(job, rank, world)
    if job.get("resume"):
        with open(job["state"] + ".0") as f:
            loader.load_state_dict(json.load(f))  # rank 0's state resumes every rank
    record = {}
    stop_at = job.get("stop_at")
    for epoch in range(loader.epoch, job["epochs"]):
        loader.set_epoch(epoch)
        rows, steps = [], 0
        for batch in loader:
            step = torch.ones(1)
            tdist.all_reduce(step)  # every rank takes part in every step
            assert int(step.item()) == world
            rows.append(batch["__row__"].tolist())
            steps += 1
            if stop_at == [epoch, steps]:
                with open(f"{job['state']}.{rank}", "w") as f:
                    json.dump(loader.state_dict(), f)
                break
        gathered = [None] * world
        tdist.all_gather_object(gathered, {"rank": rank, "steps": steps, "batches": len(loader), "rows": rows})
        record[str(epoch)] = gathered
        if stop_at is not None and stop_at[0] == epoch:
            break
    tdist.barrier()
    if rank == 0:
        with open(job["out"], "w") as f:
            json.dump(record, f)
    tdist.destroy_process_group()


def train(job: dict) -> None:
    loader = loader_for(job, job.get("rank", 0), job.get("world_size", 1))
    log_path, ckpt_path = job["log"], job["checkpoint"]
    if os.path.exists(ckpt_path):
        with open(ckpt_path) as f:
            ckpt = json.load(f)
        with open(log_path, "r+b") as f:
            f.truncate(ckpt["log_bytes"])  # the steps after the checkpoint are lost with the process
        loader.load_state_dict(ckpt["state"])
    with open(log_path, "ab") as log:
        for epoch in range(loader.epoch, job["epochs"]):
            loader.set_epoch(epoch)
            for batch in loader:
                log.write((json.dumps([epoch, batch["__row__"].tolist()]) + "\n").encode())
                log.flush()
                tmp = ckpt_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"state": loader.state_dict(), "log_bytes": log.tell()}, f)
                os.replace(tmp, ckpt_path)
                time.sleep(job.get("step_s", 0))


if __name__ == "__main__":
    mode, job_file = sys.argv[1], sys.argv[2]
    with open(job_file) as fh:
        {"dist": dist, "train": train}[mode](json.load(fh))
