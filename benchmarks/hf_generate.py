"""HuggingFace ``generate()`` with a compiled forward: ember against eager and torch.compile.

    python -m benchmarks.hf_generate                                 # the default archs, backend eager
    python -m benchmarks.hf_generate --backend aot_eager --only gpt2,llama --json out.json
    python -m benchmarks.hf_generate --no-torch                      # skip torch.compile's counts

The way most users compile a HuggingFace model for generation is ``model.forward =
torch.compile(model.forward)`` followed by ``model.generate(...)``: a prefill call, then one decode
call per new token with a KV cache whose length grows by one each step. Each architecture is built
from the tiny random config of ``benchmarks.hf_sweep`` and runs, in its own process, greedy
decoding of ``--new-tokens`` tokens for each variant:

- ``pad`` / ``nomask``: a batch of 2 with an attention mask where the second prompt is padded
  (left padding for decoder-only models, right padding of the encoder input for encoder-decoders),
  or no attention mask at all;
- ``dynamic`` / ``static``: the default DynamicCache, or ``cache_implementation="static"``;
- optional tokens: ``b1`` a batch of one prompt (sizes of 1 specialise), ``beam`` beam search with
  2 beams (the cache is reordered between calls), ``nocache`` ``use_cache=False`` (each call
  re-reads the whole sequence). E.g. ``--variants nomask-dynamic-b1,pad-dynamic-beam``.

Every variant calls ``generate()`` twice, the second time with a longer prompt (automatic dynamic:
the prompt length and the cache length should not recompile again). The generated tokens must
equal eager's exactly and the scores (``output_scores=True``) agree within the tolerance; the row
records ember's graphs, recompiles, breaks and eager frames after each call, and the same counts of
``torch.compile`` (same backend; graphs counted by a wrapping backend, recompiles by its
``recompiles`` log) on the same calls.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys

from benchmarks.hf_sweep import ARCHS, _config, torch_counting_backend

DEFAULT_ARCHS = ("gpt2", "llama", "mistral", "qwen2", "opt", "gpt_neox", "bloom", "falcon", "t5", "bart",
                 "whisper")
VARIANTS = ("pad-dynamic", "nomask-dynamic", "pad-static", "nomask-static")
MORE_VARIANTS = ("nomask-dynamic-b1", "pad-dynamic-beam", "pad-static-beam", "pad-dynamic-nocache")


def _prompts(kind, cfg, variant, s):
    """The generate() inputs of one call: a batch of 2, prompt length ``s``."""
    import torch
    g = torch.Generator().manual_seed(s)
    tokens = variant.split("-")
    pad, b = tokens[0] == "pad", 1 if "b1" in tokens else 2
    if kind == "audio_seq2seq":  # whisper: log-mel features, no mask
        return {"input_features": torch.randn(b, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)}
    ids = torch.randint(3, 120, (b, s), generator=g)
    out = {"input_ids": ids}
    if pad:
        mask = torch.ones(b, s, dtype=torch.long)
        if kind == "causal":  # left padding, as generate() wants for decoder-only models
            mask[-1, :2] = 0
            ids[-1, :2] = 0
        else:  # the encoder input is right-padded
            mask[-1, -2:] = 0
            ids[-1, -2:] = 0
        out["attention_mask"] = mask
    return out


def _gen_kwargs(variant, new_tokens):
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1,
              pad_token_id=0, output_scores=True, return_dict_in_generate=True, disable_compile=True)
    tokens = variant.split("-")
    if "static" in tokens:
        kw["cache_implementation"] = "static"
    if "beam" in tokens:
        kw["num_beams"] = 2
    if "nocache" in tokens:
        kw["use_cache"] = False
    return kw


class _RecompileCounter(logging.Handler):
    """Counts torch.compile's recompiles from its ``recompiles`` log artifact."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.n = 0

    def emit(self, record):
        if "Recompiling function" in record.getMessage():
            self.n += 1


def _max_score_diff(a, b):
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return float("inf")
        fin = y.isfinite()  # scores of suppressed tokens are -inf in both
        if not bool((x.isfinite() == fin).all()) or not bool((x[~fin] == y[~fin]).all()):
            return float("inf")
        d = (x[fin].double() - y[fin].double()).abs()
        if d.numel():
            worst = max(worst, d.max().item() / (y[fin].double().abs().max().item() + 1.0))
    return worst


def run_one(arch, backend, variants, new_tokens=8, with_torch=True, attn="sdpa", lengths=(6, 9)):
    import copy
    import warnings

    import torch
    import transformers

    import ember
    cls_name, extra, kind = ARCHS[arch]
    torch.manual_seed(0)
    cfg = _config(arch, extra, attn)
    try:
        model = getattr(transformers, cls_name)(cfg).eval()
    except ValueError:  # no sdpa for this architecture (bloom, ...): its explicit attention
        torch.manual_seed(0)
        cfg = _config(arch, extra, "eager")
        model = getattr(transformers, cls_name)(cfg).eval()
    tol = 1e-3 if backend == "inductor" else 1e-4
    rows = []
    for variant in variants:
        row = {"arch": arch, "variant": variant, "backend": backend, "attn": model.config._attn_implementation}
        rows.append(row)
        if kind == "audio_seq2seq" and variant.startswith("pad"):
            row["status"] = "n/a (no text mask)"
            continue
        calls = [(_prompts(kind, cfg, variant, s), _gen_kwargs(variant, new_tokens)) for s in lengths]
        try:
            ref_model = copy.deepcopy(model)
            with torch.no_grad():
                expected = [ref_model.generate(**p, **kw) for p, kw in calls]
        except Exception as e:  # eager itself refuses (e.g. no static cache for this arch)
            row["status"] = f"eager-error {type(e).__name__}: {str(e)[:150]}"
            continue
        ember.reset()
        m = copy.deepcopy(model)
        m.forward = ember.compile(m.forward, backend=backend)
        got, after = [], []
        try:
            with warnings.catch_warnings(record=True) as w, torch.no_grad():
                warnings.simplefilter("always")
                for p, kw in calls:
                    got.append(m.generate(**p, **kw))
                    after.append(ember.stats())
            fell_back = [str(x.message)[:200] for x in w if "ember" in str(x.message).lower()]
        except Exception as e:
            row["status"] = "CRASH"
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        same_tokens = all(torch.equal(a.sequences, b.sequences) for a, b in zip(got, expected))
        diff = max(_max_score_diff(a.scores, b.scores) for a, b in zip(got, expected))
        row["tokens_equal"] = same_tokens
        row["scores_diff"] = diff
        row["status"] = "ok" if same_tokens and diff <= tol else "WRONG"
        row["ember"] = [{k: st[k] for k in ("graphs", "recompiles", "graph_breaks", "fallbacks")} for st in after]
        if fell_back:
            row["warnings"] = fell_back[:3]
        row["tokens"] = [a.sequences.tolist() for a in expected]
        if with_torch:
            row["torch"] = _torch_counts(model, backend, calls)
    return rows


def _torch_counts(model, backend, calls):
    import copy

    import torch
    import torch._dynamo
    import torch._logging
    torch._dynamo.reset()
    counter = {"graphs": 0}
    rec = _RecompileCounter()
    torch._logging.set_logs(recompiles=True)
    logger = logging.getLogger("torch._dynamo")
    logger.addHandler(rec)
    out = []
    try:
        m = copy.deepcopy(model)
        m.forward = torch.compile(m.forward, backend=torch_counting_backend(backend, counter))
        with torch.no_grad():
            for p, kw in calls:
                m.generate(**p, **kw)
                out.append({"graphs": counter["graphs"], "recompiles": rec.n})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {str(e)[:150]}"})
    finally:
        logger.removeHandler(rec)
        torch._logging.set_logs()
    return out


def _fmt(row):
    if "ember" not in row:
        return f"{row['arch']:9s} {row['variant']:15s} {row['status']} {row.get('error', '')}"[:300]
    e = "/".join(f"{s['graphs']}g{s['recompiles']}r" for s in row["ember"])
    br = sum(s["graph_breaks"] for s in row["ember"][-1:])
    fb = row["ember"][-1]["fallbacks"]
    t = "/".join(f"{s['graphs']}g{s['recompiles']}r" if "graphs" in s else s["error"][:60]
                 for s in row.get("torch", [])) or "-"
    return (f"{row['arch']:9s} {row['variant']:15s} {row['status']:5s} tokens_equal={row['tokens_equal']} "
            f"diff={row['scores_diff']:.1e} ember={e} breaks={br} fallbacks={fb} torch={t}")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="")
    p.add_argument("--backend", default="eager")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--attn", default="sdpa", choices=("eager", "sdpa"))
    p.add_argument("--no-torch", action="store_true", help="skip torch.compile's graph and recompile counts")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--json", default="")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    if a.one:
        rows = run_one(a.one, a.backend, variants, a.new_tokens, not a.no_torch, a.attn)
        print("ROWS " + json.dumps(rows))
        return
    rows = []
    for arch in [x for x in a.only.split(",") if x] or list(DEFAULT_ARCHS):
        cmd = [sys.executable, "-m", "benchmarks.hf_generate", "--one", arch, "--backend", a.backend,
               "--variants", ",".join(variants), "--new-tokens", str(a.new_tokens), "--attn", a.attn]
        if a.no_torch:
            cmd.append("--no-torch")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                               env={**os.environ, "PYTHONWARNINGS": "ignore"})
            line = [x for x in r.stdout.splitlines() if x.startswith("ROWS ")]
            got = json.loads(line[-1][5:]) if line else [
                {"arch": arch, "variant": "*", "status": "DIED", "error": (r.stderr or "")[-300:]}]
        except subprocess.TimeoutExpired:
            got = [{"arch": arch, "variant": "*", "status": "TIMEOUT"}]
        for row in got:
            print(_fmt(row), flush=True)
        rows += got
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [f"{r['arch']}:{r['variant']}" for r in rows
           if r["status"] != "ok" and not r["status"].startswith(("n/a", "eager-error"))]
    print(f"{len(rows) - len(bad)}/{len(rows)} ok or n/a; not ok: {', '.join(bad)}")


if __name__ == "__main__":
    main()
