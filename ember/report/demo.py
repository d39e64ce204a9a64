"""``python -m ember demo``: compile the built-in nanoGPT's training step and show what happened.

The demo trains two identical copies of a small GPT (ember/report/demo_model.py)
side by side for a few SGD steps, one eagerly and one through ``ember.compile``,
and prints: the losses of both, how many graphs were compiled, graph breaks,
guards, recompiles, the compile time by phase, the steady-state time per step
against eager, and the largest difference from eager in loss and gradients.

What is compiled (``--target``):

- ``step``: the whole training step function (forward, loss, ``loss.backward()``),
  the way one compiles a training loop body; ``backward()`` is a graph break.
- ``model``: the module (``ember.compile(model)``, like PyTorch's own compile);
  forward and loss are one graph, the backward runs the AOT backward graph.
- ``auto`` (default): ``step``, and if ember runs the whole step function
  eagerly (nothing compiled), say why and compile the model instead.
"""
from __future__ import annotations

import copy
import statistics
import time
from typing import Any, Callable

import torch

from ember.report.demo_model import GPTConfig, make_batch, make_model

TOLERANCE = 1e-4  # max |ember - eager| accepted with the eager/aot_eager backends


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            for p in model.parameters()]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((float((x.double() - y.double()).abs().max()) for x, y in zip(a, b)
                if x.numel()), default=0.0)


def _median_ms(fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _caches() -> list:
    """ember's per-function code caches (empty if unavailable)."""
    try:
        from ember.capture.cache import live_caches
        return live_caches()
    except Exception:  # noqa: BLE001
        return []


def _graph_summary() -> tuple[int | None, list[int], list[str]]:
    """(guard count or None, node count per graph, reasons functions ran eagerly)."""
    guards, nodes, eager_reasons = 0, [], []
    known = False
    for cache in _caches():
        for entry in getattr(cache, "entries", []):
            try:
                guards += len(entry.guards)
                known = True
            except Exception:  # noqa: BLE001
                pass
            graph = getattr(entry, "graph", None)
            if graph is not None:
                nodes.append(sum(1 for n in graph.graph.nodes if n.op == "call_function"
                                 or n.op == "call_method" or n.op == "call_module"))
        reason = getattr(cache, "run_eagerly_reason", None)
        if reason:
            eager_reasons.append(f"{cache.label}: {reason}")
    return (guards if known else None), nodes, eager_reasons


def _break_reasons() -> list[str]:
    out = []
    for cache in _caches():
        for e in getattr(cache, "break_reasons", []):
            where = getattr(e, "where", None)
            out.append(f"{getattr(e, 'reason', e)}" + (f" (at {where})" if where else ""))
    return out


def run_demo(backend: str = "aot_eager", steps: int = 5, target: str = "auto",
             batch_size: int = 4, timing_steps: int = 40, print_fn=print) -> int:
    """Run the demo; returns 0 if ember matched eager, 1 otherwise."""
    import ember

    out = print_fn
    cfg = GPTConfig()
    tol = TOLERANCE * (10 if backend == "inductor" else 1)
    eager_model = make_model(cfg)
    ember_model = copy.deepcopy(eager_model)
    n_params = sum(p.numel() for p in eager_model.parameters())
    idx, targets = make_batch(cfg, batch_size=batch_size)
    out(f"ember demo: nanoGPT ({cfg.n_layer} layers, {cfg.n_embd} dim, {cfg.n_head} heads, "
        f"vocab {cfg.vocab_size}, block {cfg.block_size}; {n_params:,} parameters), "
        f"batch {batch_size}x{cfg.block_size}, backend {backend!r}")

    def eager_step(i=idx, t=targets):
        _, loss = eager_model(i, t)
        loss.backward()
        return loss.detach()

    def train_step(i, t):  # the function ember compiles with --target step
        _, loss = ember_model(i, t)
        loss.backward()
        return loss.detach()

    def compile_target(kind: str):
        ember.reset()
        if kind == "step":
            out("compiling the training step (forward + loss + backward) with ember.compile ...")
            return ember.compile(train_step, backend=backend)
        out("compiling the model with ember.compile (forward + loss in the graph; "
            "backward through the AOT backward graph) ...")
        compiled_model = ember.compile(ember_model, backend=backend)

        def model_step(i, t):
            _, loss = compiled_model(i, t)
            loss.backward()
            return loss.detach()
        return model_step

    # eager reference for the first step, then the first (compiling) call
    eager_model.zero_grad(set_to_none=True)
    t = time.perf_counter()
    ref_loss = eager_step()
    eager_first_s = time.perf_counter() - t
    ref_grads = _grads(eager_model)

    kind = "step" if target in ("auto", "step") else "model"
    state = copy.deepcopy(ember_model.state_dict())
    while True:
        step_fn = compile_target(kind)
        ember_model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        try:
            loss = step_fn(idx, targets)
        except Exception as e:  # noqa: BLE001
            out(f"FAILED: the compiled step raised {type(e).__name__}: {e}")
            return 1
        first_s = time.perf_counter() - t
        stats = ember.stats()
        if kind == "step" and target == "auto" and stats.get("graphs", 0) == 0:
            _, _, reasons = _graph_summary()
            out("  ember ran the step function eagerly: " + ("; ".join(reasons) or "no graph"))
            out("  -> compiling the model instead")
            ember_model.load_state_dict(state)
            kind = "model"
            continue
        break
    compile_times = ember.compile_times()
    first_loss_diff = abs(float(loss) - float(ref_loss))
    first_grad_diff = _max_diff(ref_grads, _grads(ember_model))
    guards, nodes, eager_reasons = _graph_summary()

    # a few SGD steps side by side
    opt_e = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(ember_model.parameters(), lr=0.1)
    opt_e.step()
    opt_c.step()
    out(f"\n{'step':>4}  {'eager loss':>11}  {'ember loss':>11}  {'|diff|':>8}")
    out(f"{1:>4}  {float(ref_loss):>11.6f}  {float(loss):>11.6f}  {first_loss_diff:>8.1e}")
    max_loss_diff = first_loss_diff
    for s in range(2, steps + 1):
        g = torch.Generator().manual_seed(100 + s)
        batch = torch.randint(0, cfg.vocab_size, (batch_size, cfg.block_size + 1), generator=g)
        i, tt = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        opt_e.zero_grad(set_to_none=True)
        opt_c.zero_grad(set_to_none=True)
        le = eager_step(i, tt)
        lc = step_fn(i, tt)
        opt_e.step()
        opt_c.step()
        d = abs(float(le) - float(lc))
        max_loss_diff = max(max_loss_diff, d)
        out(f"{s:>4}  {float(le):>11.6f}  {float(lc):>11.6f}  {d:>8.1e}")
    param_diff = _max_diff([p.detach() for p in eager_model.parameters()],
                           [p.detach() for p in ember_model.parameters()])

    # steady state: alternate eager and ember rounds so machine noise hits both
    def timed(fn):
        def run():
            fn(idx, targets)
        return run
    e_ms, c_ms = [], []
    for _ in range(max(1, timing_steps // 5)):
        e_ms.append(_median_ms(timed(eager_step), 5))
        c_ms.append(_median_ms(timed(step_fn), 5))
    eager_ms, ember_ms = statistics.median(e_ms), statistics.median(c_ms)
    stats = ember.stats()

    out("")
    out(f"compiled            {'training step function' if kind == 'step' else 'model'}")
    out(f"graphs compiled     {stats.get('graphs', 0)}"
        + (f"  ({', '.join(str(n) for n in nodes)} ops)" if nodes else ""))
    out(f"graph breaks        {stats.get('graph_breaks', 0)}")
    for r in _break_reasons():
        out(f"  - {r}")
    out(f"guards              {guards if guards is not None else 'n/a'}")
    out(f"recompiles          {stats.get('recompiles', 0)}")
    if stats.get("fallbacks"):
        out(f"ran eagerly         {stats['fallbacks']} function(s): " + "; ".join(eager_reasons))
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in sorted(compile_times.items()))
    compile_s = max(first_s - eager_first_s, 0.0)
    out(f"compile time        {compile_s:.2f}s (first call {first_s:.2f}s - one eager step "
        f"{eager_first_s * 1e3:.0f}ms)" + (f"; phases: {phases}" if phases else ""))
    out(f"steady state        eager {eager_ms:.2f} ms/step, ember {ember_ms:.2f} ms/step "
        f"-> {eager_ms / ember_ms:.2f}x vs eager")
    out(f"max |diff| vs eager first step: loss {first_loss_diff:.1e}, grads {first_grad_diff:.1e}; "
        f"after {steps} SGD steps: loss {max_loss_diff:.1e}, params {param_diff:.1e}")
    ok = max(first_loss_diff, first_grad_diff, max_loss_diff, param_diff) <= tol
    out(f"result              {'OK' if ok else 'MISMATCH'}: ember "
        f"{'matches' if ok else 'does NOT match'} eager (tolerance {tol:g})")
    return 0 if ok else 1
