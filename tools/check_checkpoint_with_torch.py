#!/usr/bin/env python3
"""Cross-check a selectivbench checkpoint against the reference PyTorch RecNet.

usage: check_checkpoint_with_torch.py SSM_MODELS_PY CKPT DUMP [OUT_CKPT]

CKPT is a checkpoint written by `selectivbench train`, DUMP the file of
`selectivbench eval CKPT --dump DUMP` (inputs, logits, mask of the first test batch).
The script builds the reference RecNet (imported from SSM_MODELS_PY, the reference's
models/ssm_models.py) with the configuration recorded in the checkpoint, loads the
checkpoint with load_state_dict(strict=True), runs the dumped inputs and compares the
logits with ours. With OUT_CKPT it also writes the reference model's own state_dict
(after a few random updates) as a safetensors file, for the reverse check
(`selectivbench eval OUT_CKPT --dump ...` must reproduce the logits printed here).
Needs only torch and numpy (safetensors files are read and written by hand).
tools/torch_roundtrip.py (tests/cli/test_torch.sh, `./run.sh test-torch`) runs both
directions automatically on freshly trained tiny models.
"""
import json
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from make_torch_vectors import load_reference  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        tensors[name] = torch.from_numpy(
            np.frombuffer(data[base + b:base + e], dtype="<f4").reshape(info["shape"]).copy())
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        raw = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def heads(d):
    if d / 128 <= 4:
        return 4
    n = 4
    while n <= d:
        if d % n == 0 and d // n <= 128:
            return n
        n *= 2
    raise ValueError(d)


def main():
    mod = load_reference(sys.argv[1])
    weights, meta = read_safetensors(sys.argv[2])
    dump, _ = read_safetensors(sys.argv[3])
    cfg = json.loads(meta["config"])
    inp = dump["inputs"].shape[-1]
    out = weights["decoder.bias"].shape[0]
    d = weights["encoder.bias"].shape[0]
    net = mod.RecNet(model=cfg["model"], inp_size=inp, d_output=out, lr=cfg["lr"],
                     dropout=cfg["dropout"], layers=cfg["layers"], d_model=d,
                     d_state=cfg["d_state"], n_head=heads(d), reg=True,
                     rope_base=int(cfg["rope_base"]))
    net.load_state_dict(weights, strict=True)
    net.eval()
    with torch.no_grad():
        logits = net(dump["inputs"])
    mask = dump["mask"].bool()
    diff = (logits - dump["logits"]).abs()[mask].max().item()
    scale = dump["logits"].abs()[mask].max().item()
    print(f"{cfg['model']}: {int(mask.sum())} frames, max |logit difference| {diff:.3g} "
          f"(logits up to {scale:.3g})")
    ok = diff <= 1e-4 * max(1.0, scale)
    if len(sys.argv) > 4:
        # the reverse direction: perturb the reference model, save its state_dict
        torch.manual_seed(0)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.01 * torch.randn_like(p))
            logits2 = net(dump["inputs"])
        write_safetensors(sys.argv[4], net.state_dict(), {})
        torch.save({"inputs": dump["inputs"], "logits": logits2}, sys.argv[4] + ".pt")
        print(f"wrote {sys.argv[4]}; reference logits[0, 0, :4] = "
              f"{[round(v, 6) for v in logits2[0, 0, :4].tolist()]}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
