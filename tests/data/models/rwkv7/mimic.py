# Pure-PyTorch mimic of the benchmark's RecNet around fla's RWKV7Attention (fla commit bc3b101d,
# fla/layers/rwkv7.py with the LoRA of fla/layers/rwkv6.py), built as
# RWKV7Attention(hidden_size=d, head_dim=d//H, layer_idx=i, num_hidden_layers=L), fla's other
# defaults. Modules are created, and initialised, in fla's order (the LoRAs' Module.apply
# re-initialisation included), so that the initial weights after torch.manual_seed(seed) are
# fla's; the recurrence is fla/ops/generalized_delta_rule/dplr/naive.py's
# (S = S exp(w) + k v^T + b (a^T S)), called as chunk_rwkv7 calls it (a = -kk, b = kk a,
# scale 1). Layer 0's v is handed to the later layers (v_first), as fla's RWKV7 model does.
#
#   /usr/bin/python3 mimic.py vectors OUT.json   reference of tests/unit/test_dplr*.c
#   /usr/bin/python3 mimic.py check CKPT DUMP    a selectivbench checkpoint against the mimic
import json, math, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402
torch.set_default_dtype(torch.float32)


class LoRA(nn.Module):
    def __init__(s, din, dout, rank, bias=True, activation='tanh'):
        super().__init__()
        s.bias = bias
        s.activation = {'tanh': nn.Tanh(), 'sigmoid': nn.Sigmoid(), None: nn.Identity()}[activation]
        s.lora = nn.Sequential(nn.Linear(din, rank, bias=False), s.activation,
                               nn.Linear(rank, dout, bias=bias))
        s.apply(s._init)  # visits activation, lora.0, lora.2, lora, self: five re-inits

    def _init(s, module):
        if getattr(module, '_done', False):
            return
        nn.init.zeros_(s.lora[0].weight)
        shape = s.lora[2].weight.shape
        gain = math.sqrt(shape[1] / shape[0]) if shape[1] > shape[0] else 1
        nn.init.orthogonal_(s.lora[2].weight, gain=gain * 0.1)
        if s.lora[2].bias is not None:
            nn.init.zeros_(s.lora[2].bias)
        module._done = True

    def forward(s, x):
        return s.lora(x)


def lora_dim(c, d, f):
    return max(32, int(round((c * (d ** 0.5)) * f / 32) * 32))


def normalize(x):
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class RWKV7(nn.Module):
    def __init__(s, d, H, layer_idx, L):
        super().__init__()
        s.d, s.H, s.K, s.layer_idx = d, H, d // H, layer_idx
        K = s.K
        f = K / 64
        Rw = Ra = lora_dim(2.5, d, f); Rg = lora_dim(5, d, 1); Rv = lora_dim(1.7, d, f)
        for n in ('x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g'):
            setattr(s, n, nn.Parameter(torch.zeros(1, 1, d)))
        s.k_k = nn.Parameter(torch.zeros(d)); s.k_a = nn.Parameter(torch.zeros(d))
        s.r_k = nn.Parameter(torch.zeros(H, K))
        s.r_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False); s.o_proj = nn.Linear(d, d, bias=False)
        s.w_lora = LoRA(d, d, Rw, activation='tanh')
        if layer_idx != 0:
            s.v_lora = LoRA(d, d, Rv, activation=None)
        s.a_lora = LoRA(d, d, Ra, activation=None)
        s.g_lora = LoRA(d, d, Rg, activation='sigmoid', bias=False)
        s.g_norm = nn.GroupNorm(H, d, eps=K * 1e-5, affine=True)
        # the layer's own init (fla's _initialize_weights on the RWKV7Attention module)
        with torch.no_grad():
            r0 = layer_idx / (L - 1) if L > 1 else 0.0  # fla divides by L - 1
            r1 = 1.0 - layer_idx / L
            ddd = torch.ones(1, 1, d); www = torch.zeros(d); zig = torch.zeros(d); lin = torch.zeros(d)
            for n in range(d):
                lin[n] = n / (d - 1) - 0.5
                zig[n] = ((n % K) - ((K - 1) / 2)) / ((K - 1) / 2)
                zig[n] = zig[n] * abs(zig[n])
                www[n] = -6 + 6 * (n / (d - 1)) ** (1 + 1 * r0 ** 0.3)
                ddd[0, 0, n] = n / d
            s.x_r.data = 1.0 - torch.pow(ddd, 0.2 * r1); s.x_w.data = 1.0 - torch.pow(ddd, 0.9 * r1)
            s.x_k.data = 1.0 - torch.pow(ddd, 0.7 * r1); s.x_v.data = 1.0 - torch.pow(ddd, 0.7 * r1)
            s.x_a.data = 1.0 - torch.pow(ddd, 0.9 * r1); s.x_g.data = 1.0 - torch.pow(ddd, 0.2 * r1)
            nn.init.constant_(s.k_a, 1.02); nn.init.constant_(s.r_k, -0.04)
            s.k_k.data.copy_(torch.zeros(d) + 0.71 - lin * 0.1)
            s.w_lora.lora[2].bias.data.copy_(www + 0.5 + zig * 2.5)
            s.a_lora.lora[2].bias.data.copy_(-0.19 + zig * 0.3 + lin * 0.4)
            if layer_idx != 0:
                s.v_lora.lora[2].bias.data.copy_(0.73 - lin * 0.4)  # its re-init is skipped
            s.g_norm.weight.data[:] = ((layer_idx + 1) / L) ** 0.7
            nn.init.orthogonal_(s.r_proj.weight)
            nn.init.orthogonal_(s.k_proj.weight, gain=0.1)
            nn.init.orthogonal_(s.v_proj.weight)
            s.o_proj.weight.data.zero_()

    def forward(s, x, v_first):
        B, T, d = x.shape
        H, K = s.H, s.K
        delta = torch.cat([x.new_zeros(B, 1, d), x[:, :-1]], 1) - x
        xr, xw, xk, xv, xa, xg = (x + delta * m for m in (s.x_r, s.x_w, s.x_k, s.x_v, s.x_a, s.x_g))
        r = s.r_proj(xr)
        w = -0.6065306597126334 * s.w_lora(xw).sigmoid()
        k = s.k_proj(xk); v = s.v_proj(xv)
        if s.layer_idx == 0:
            v_first = v
        else:
            v = torch.lerp(v, v_first, s.v_lora(xv).sigmoid())
        a = s.a_lora(xa).sigmoid()
        g = s.g_lora(xg)
        kk = normalize((k * s.k_k).view(B, T, H, K))
        k = k.addcmul(k * (a - 1), s.k_a)
        r, w, k, a, vh = (t.view(B, T, H, K) for t in (r, w, k, a, v))
        alpha, beta = -kk, kk * a
        S = x.new_zeros(B, H, K, K)
        o = []
        for t in range(T):
            kv = k[:, t, :, :, None] * vh[:, t, :, None, :]
            low = (S * alpha[:, t, :, :, None]).sum(-2, keepdim=True) * beta[:, t, :, :, None]
            S = S * w[:, t, :, :, None].exp() + kv + low
            o.append(torch.einsum('bhk,bhkv->bhv', r[:, t], S))
        o = torch.stack(o, 1)
        o = s.g_norm(o.reshape(B * T, d)).view(B, T, d)
        bonus = ((r * k * s.r_k).sum(-1, keepdim=True) * vh).view(B, T, d)
        return s.o_proj((o + bonus) * g), v_first


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: RWKV7(d, H, l, L))

    def forward(s, x):  # the value residual: layer 0's v goes to every later layer
        x = s.encoder(x)
        v_first = None
        for layer, norm in zip(s.layers, s.norms):
            y, v_first = layer(x, v_first)
            x = norm(x + y)
        return s.decoder(x)


def set_formula_weights(net):
    # o_proj and the LoRAs' first matrices start at zero (the layer's output is 0 at init), so
    # the logits are compared with every parameter set by a formula both sides compute:
    # tensor ti (state_dict order), element j: 0.2 sin(0.7 j + 1.3 ti + 0.2), + 1 for norm weights
    with torch.no_grad():
        for ti, (name, t) in enumerate(net.state_dict().items()):
            j = torch.arange(t.numel(), dtype=torch.float64)
            val = 0.2 * torch.sin(0.7 * j + 1.3 * ti + 0.2)
            if 'norm' in name and name.endswith('weight'):
                val = val + 1.0
            t.copy_(val.view(t.shape))


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 37  # crosses the op's 16-token blocks twice with a ragged tail
    x = mimic_common.fixed_input(B, T, I)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    counts = {str(w): sum(p.numel() for p in RecNet(I, w, O, L, heads(w)).parameters()) for w in (16, 32)}
    net = net.double()
    set_formula_weights(net)
    with torch.no_grad():
        y = net(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla bc3b101d RWKV7Attention(hidden_size=d, '
                   'head_dim=d//H, layer_idx=i, num_hidden_layers=L); params: the initial weights; '
                   'logits: float64 forward with every parameter set by set_formula_weights',
           'input': [float(v) for v in x.flatten()], 'counts': counts,
           'models': {'rwkv7': {'params': params, 'count': counts[str(d)],
                                'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print('counts', counts, 'max |logit|', float(y.abs().max()))


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('rwkv7', vectors, build)
