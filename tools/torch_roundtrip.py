#!/usr/bin/env python3
"""Checkpoints between selectivbench and the PyTorch RecNet, both ways (tests/cli/test_torch.sh,
`./run.sh test-torch`).

usage: torch_roundtrip.py SELECTIVBENCH WORKDIR [SSM_MODELS_PY]

The PyTorch RecNet is the reference's (imported from SSM_MODELS_PY, the reference's
models/ssm_models.py, through make_torch_vectors.load_reference) when that path is given,
for gru, transformer and s4 (the other layer types need mamba_ssm or fla); otherwise the GRU
RecNet of tools/torch_recnet.py, written from docs/models/recnet.md. For each model:
  1. `selectivbench train` trains a tiny run (its checkpoint has the run's configuration in
     its metadata); `selectivbench eval CKPT --dump` gives its test loss and accuracy and the
     first test batch (inputs, logits, padding mask);
  2. the checkpoint loads into the PyTorch RecNet with load_state_dict(strict=True) (every
     name and shape of the reference, nothing missing, nothing extra) and gives the dumped
     logits on the dumped inputs: max |difference| <= 1e-4 max(1, max |logit|) over the valid
     frames, and the same argmax in every valid frame whose two largest logits are 1e-3 apart;
  3. torch's own state_dict(), written as a plain safetensors file without metadata (as a
     PyTorch user would), loads into `selectivbench eval` given the run's flags and gives
     exactly the checkpoint's test loss and accuracy;
  4. after a random change of every weight in torch, `selectivbench eval --dump` of torch's
     state_dict gives torch's logits on the same batch (same tolerance), which differ from
     the unchanged model's.
Prints a line per model; exits 1 if any check failed. Needs torch and numpy only.
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_checkpoint_with_torch import heads, read_safetensors, write_safetensors  # noqa: E402

# A tiny task and run: 9-letter grammar, 20-element samples with gaps of 1-3 frames, 4 updates.
TASK_FLAGS = ["--vocab", "9", "--amb", "8", "--grammar_scale", "True", "--train_seqlen_max", "20",
              "--test_seqlen_max", "20", "--train_gap_max", "0.3", "--dataset_size", "64",
              "--test_size", "16", "--batch_size", "16", "--test_bs", "8", "--epoch_size", "32",
              "--lr", "0.01", "--seed", "5", "--threads", "2"]
MODEL_FLAGS = ["--feat_size", "16", "--layers", "2", "--d_state", "4", "--dropout", "0.1"]
TOLERANCE = 1e-4  # relative to max(1, max |logit|)
MARGIN = 1e-3     # frames whose top two logits are closer than this may flip their argmax


class Failed(Exception):
    pass


def run(cmd):
    """Runs a selectivbench command; its stdout, or Failed with its stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failed(f"'{' '.join(cmd)}' exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def eval_json(cmd):
    """The test loss and accuracy of an `eval ... --json` command."""
    out = json.loads(run(cmd + ["--json"]).strip().splitlines()[-1])
    return out["test_loss"], out["test_acc"]


def compare_logits(what, got, want, mask):
    """got, want: [B, T, C] logits; mask: [B, T] valid frames. Raises Failed on a mismatch."""
    valid = mask.bool()
    diff = (got - want).abs()[valid].max().item()
    scale = want.abs()[valid].max().item()
    if not diff <= TOLERANCE * max(1.0, scale):
        raise Failed(f"{what}: max |logit difference| {diff:.3g} (logits up to {scale:.3g})")
    top2 = want[valid].topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1]) > MARGIN
    same = got[valid].argmax(-1) == want[valid].argmax(-1)
    flipped = int((clear & ~same).sum())
    if flipped:
        raise Failed(f"{what}: the argmax differs in {flipped} of {int(clear.sum())} frames")
    return diff, int(valid.sum())


def build_recnet(module, cfg, weights, n_inputs):
    d_model = weights["encoder.bias"].shape[0]
    return module.RecNet(model=cfg["model"], inp_size=n_inputs,
                         d_output=weights["decoder.bias"].shape[0], lr=cfg["lr"],
                         dropout=cfg["dropout"], layers=cfg["layers"], d_model=d_model,
                         d_state=cfg["d_state"], n_head=heads(d_model), reg=True,
                         rope_base=int(cfg["rope_base"]))


def round_trip(sb, module, model, work):
    flags = ["--model", model] + MODEL_FLAGS + TASK_FLAGS
    ckpt = os.path.join(work, f"{model}.safetensors")
    dump = os.path.join(work, f"{model}.dump.safetensors")
    # 1. train, evaluate, dump the first test batch
    run([sb, "train"] + flags + ["--results", os.path.join(work, "results"), "--ckpt", ckpt,
                                 "--quiet"])
    loss, acc = eval_json([sb, "eval", ckpt, "--dump", dump])
    weights, meta = read_safetensors(ckpt)
    batch, _ = read_safetensors(dump)
    cfg = json.loads(meta["config"])

    # 2. the checkpoint in torch: strict load, the same logits
    net = build_recnet(module, cfg, weights, batch["inputs"].shape[-1])
    try:
        net.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise Failed(f"load_state_dict(strict=True): {' '.join(str(e).split())}")
    net.eval()
    with torch.no_grad():
        logits = net(batch["inputs"])
    diff, frames = compare_logits("checkpoint -> torch", logits, batch["logits"], batch["mask"])

    # 3. torch's state_dict back into selectivbench: exactly the same test numbers
    resaved = os.path.join(work, f"{model}.torch.safetensors")
    write_safetensors(resaved, net.state_dict(), {})
    loss2, acc2 = eval_json([sb, "eval", resaved] + flags)
    if (loss2, acc2) != (loss, acc):
        raise Failed(f"torch's state_dict: test loss {loss2!r}, accuracy {acc2!r}; "
                     f"the checkpoint's: {loss!r}, {acc!r}")

    # 4. torch changes every weight: selectivbench computes torch's new logits
    torch.manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
        logits3 = net(batch["inputs"])
    changed = os.path.join(work, f"{model}.changed.safetensors")
    dump3 = os.path.join(work, f"{model}.changed.dump.safetensors")
    write_safetensors(changed, net.state_dict(), {})
    loss3, acc3 = eval_json([sb, "eval", changed, "--dump", dump3] + flags)
    batch3, _ = read_safetensors(dump3)
    if not torch.equal(batch3["inputs"], batch["inputs"]):
        raise Failed("the changed model's dump holds another batch")
    diff3, _ = compare_logits("changed torch weights -> selectivbench", batch3["logits"],
                              logits3, batch3["mask"])
    moved = (logits3 - batch["logits"]).abs()[batch["mask"].bool()].max().item()
    if not moved > 1e-2:
        raise Failed(f"the changed weights moved the logits by only {moved:.3g}")
    print(f"{model}: {len(weights)} tensors load strictly; {frames} frames: logits within "
          f"{diff:.2g} (checkpoint -> torch) and {diff3:.2g} (changed torch weights -> "
          f"selectivbench); torch's state_dict: test loss {loss2:.6f}, accuracy {acc2:.4f}, "
          f"identical")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1])
    sb, work = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 4:
        from make_torch_vectors import load_reference
        module, models, source = load_reference(sys.argv[3]), ["gru", "transformer", "s4"], \
            f"the reference's RecNet ({sys.argv[3]})"
    else:
        import torch_recnet
        module, models, source = torch_recnet, ["gru"], \
            "the GRU RecNet of tools/torch_recnet.py (give the reference's models/ssm_models.py " \
            "for more models)"
    print(f"torch {torch.__version__}, {source}")
    failures = 0
    for model in models:
        try:
            round_trip(sb, module, model, work)
        except Failed as e:
            print(f"FAIL: {model}: {e}")
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
