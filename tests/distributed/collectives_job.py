"""Two gloo ranks on localhost train a small model with ember where each rank sees a different
batch size (run by test_compiler_collectives.py: ``python collectives_job.py OUT_DIR [on|off]``).

Each rank writes OUT_DIR/rank{r}.json: its graphs' code, guards, compile counts, losses, and
whether its compiled results matched eager."""
from __future__ import annotations

import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _step(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def _rank(rank: int, world: int, port: int, out_dir: str, collectives: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    import ember
    ember.config.strict = True
    ember.config.enable_compiler_collectives = collectives
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    eager = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    eager.load_state_dict(model.state_dict())
    compiled = ember.compile(_step, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    batch = 4 + rank  # the ranks see different batch sizes from the first step on
    losses, matches = [], True
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(6):
        x, y = torch.randn(batch, 6, generator=gen), torch.randn(batch, 1, generator=gen)
        loss = compiled(model, x, y)
        loss_e = _step(eager, x, y)
        matches &= bool(torch.allclose(loss, loss_e, atol=1e-6))
        for m, l, o in ((model, loss, opt), (eager, loss_e, opt_e)):
            o.zero_grad()
            l.backward()
            for p in m.parameters():  # DDP-style: average the gradients over the ranks
                dist.all_reduce(p.grad)
                p.grad /= world
            o.step()
        losses.append(loss.item())
    entries = compiled._cache.entries
    result = {
        "graphs": graphs,
        "guards": [sorted(e.guards.readable()) for e in entries],
        "stats": ember.stats(),
        "losses": losses,
        "matches": matches,
        "params_equal_eager": all(torch.allclose(a, b, atol=1e-5) for a, b in
                                  zip(model.parameters(), eager.parameters())),
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    # (gloo's threads can abort the interpreter's shutdown, "terminate called without an active
    # exception", after the work is done and written: leave without it)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    out = sys.argv[1]
    on = len(sys.argv) < 3 or sys.argv[2] == "on"
    mp.spawn(_rank, args=(2, _free_port(), out, on), nprocs=2, join=True)
