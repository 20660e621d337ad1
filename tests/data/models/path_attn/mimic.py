# Pure-PyTorch mimic of the benchmark's RecNet with fla's PaTHAttention (fla/layers/path_attn.py
# at commit bc3b101d, its defaults: no forget gate, no q/k norm, low-rank w of rank 32, short
# convolution of 3 on w, beta = 2 sigmoid). Construction order and inits as fla's module; the
# forward is written from the paper's decoding form (every cached key is multiplied by the
# new token's I - beta w w^T before the new key is appended), in float64.
#   python3 mimic.py vectors OUT.json   the reference of tests/unit/test_path_attn*.c
#   python3 mimic.py check CKPT DUMP     a selectivbench checkpoint and its `eval --dump` file:
#                                        load with strict=True, compare logits (<= 1e-4)
# Needs torch and numpy only (made with torch 1.13).
import json, struct, sys
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_default_dtype(torch.float32)


def l2n(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


class PaTHAttention(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False)
        s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False)
        s.w_proj = nn.Sequential(nn.Linear(d, 32, bias=False), nn.Linear(32, d, bias=False))
        # fla's ShortConvolution is an nn.Conv1d(groups=C, padding=W-1) with a silu after it
        s.w_conv1d = nn.Conv1d(d, d, 3, groups=d, padding=2, bias=False)
        s.bt_proj = nn.Linear(d, H, bias=True)
        s.o_proj = nn.Linear(d, d, bias=False)

    def forward(s, x):
        B, T, d = x.shape
        H = s.H
        Dh = d // H
        q = s.q_proj(x).view(B, T, H, Dh)
        k = s.k_proj(x).view(B, T, H, Dh)
        v = s.v_proj(x).view(B, T, H, Dh)
        w = s.w_proj(x)
        w = F.silu(s.w_conv1d(w.transpose(1, 2))[..., :T].transpose(1, 2))
        w = l2n(w.view(B, T, H, Dh))
        beta = s.bt_proj(x).sigmoid() * 2
        kc = x.new_zeros(B, H, 0, Dh)   # the key cache, already carried to the current token
        vc = x.new_zeros(B, H, 0, Dh)
        out = []
        for t in range(T):
            wt, bt = w[:, t], beta[:, t]                   # [B, H, Dh], [B, H]
            kc = kc - bt[..., None, None] * (kc @ wt[..., None]) * wt[:, :, None, :]
            kc = torch.cat([kc, k[:, t, :, None, :]], 2)
            vc = torch.cat([vc, v[:, t, :, None, :]], 2)
            z = (kc @ q[:, t, :, :, None]).squeeze(-1) * Dh ** -0.5   # [B, H, t+1]
            out.append((z.softmax(-1)[..., None] * vc).sum(2))
        o = torch.stack(out, 1).reshape(B, T, d)
        return s.o_proj(o)


class RecNet(nn.Module):
    def __init__(s, I, d, O, L, H):
        super().__init__()
        s.encoder = nn.Linear(I, d)
        s.norms = nn.ModuleList()
        s.layers = nn.ModuleList()
        for _ in range(L):
            s.norms.append(nn.LayerNorm(d))
            s.layers.append(PaTHAttention(d, H))
        s.decoder = nn.Linear(d, O)

    def forward(s, x):
        x = s.encoder(x)
        for layer, norm in zip(s.layers, s.norms):
            x = norm(x + layer(x))
        return s.decoder(x)


def heads(d):  # utils.get_num_heads(d, 128)
    if d / 128 <= 4:
        return 4
    n = 4
    while n <= d:
        if d % n == 0 and d // n <= 128:
            return n
        n *= 2
    raise ValueError(d)


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 40
    torch.manual_seed(1234)
    x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)],
                     dtype=torch.float64)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = [{'name': k, 'shape': list(t.shape), 'sum': float(t.double().sum()),
               'first': [float(v) for v in t.flatten()[:3]]} for k, t in net.state_dict().items()]
    counts = {str(w): sum(p.numel() for p in RecNet(I, w, O, L, heads(w)).parameters())
              for w in (16, 32)}
    with torch.no_grad():
        y = net.double()(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla PaTHAttention (bc3b101d defaults), '
                   'forward in float64 from the decoding form',
           'input': [float(v) for v in x.flatten()],
           'counts': counts,
           'models': {'path_attn': {'params': params, 'count': counts['16'],
                                    'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print('counts', counts)


def read_safetensors(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop('__metadata__', {})
    tensors = {}
    for name, info in header.items():
        assert info['dtype'] == 'F32', info['dtype']
        b, e = info['data_offsets']
        tensors[name] = torch.from_numpy(np.frombuffer(data[8 + n + b:8 + n + e], dtype='<f4')
                                         .reshape(info['shape']).copy())
    return tensors, meta


def check(ckpt, dump_path):
    weights, meta = read_safetensors(ckpt)
    dump, _ = read_safetensors(dump_path)
    cfg = json.loads(meta['config'])
    assert cfg['model'] == 'path_attn', cfg['model']
    I = dump['inputs'].shape[-1]
    O = weights['decoder.bias'].shape[0]
    d = weights['encoder.bias'].shape[0]
    net = RecNet(I, d, O, cfg['layers'], heads(d))
    net.load_state_dict(weights, strict=True)
    net = net.double().eval()
    with torch.no_grad():
        logits = net(dump['inputs'].double())
    mask = dump['mask'].bool()
    diff = (logits - dump['logits'].double()).abs()[mask].max().item()
    scale = dump['logits'].abs()[mask].max().item()
    print(f"path_attn: {int(mask.sum())} frames, max |logit difference| {diff:.3g} "
          f"(logits up to {scale:.3g})")
    sys.exit(0 if diff <= 1e-4 else 1)


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == 'vectors':
        vectors(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == 'check':
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit('usage: mimic.py vectors OUT.json | mimic.py check CKPT DUMP')
