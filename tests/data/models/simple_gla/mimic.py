# Pure-PyTorch mimic of the benchmark's RecNet around fla's SimpleGatedLinearAttention
# (fla/layers/simple_gla.py, commit bc3b101d) with hidden_size=d, num_heads=H, expand_k=1,
# expand_v=2 (GLA's arguments in the benchmark), use_short_conv=True, conv_size=4, every other
# argument at fla's default: construction order and inits as fla, the forward written from
# fla's naive recurrence (fla/ops/simple_gla/naive.py: S = exp(g) S + k v^T per head, scale
# K^-1/2), the gate logsigmoid(gk_proj(x)) / 16, the fused swish-gated RMSNorm.
#   python3 mimic.py vectors OUT.json   reference of tests/unit/test_gla_family.c (+ _float.c)
#   python3 mimic.py check CKPT DUMP    a selectivbench checkpoint against this mimic: CKPT from
#                                       `selectivbench train`, DUMP from `selectivbench eval
#                                       CKPT --dump DUMP`; exit 1 when logits differ > 1e-4
# Needs torch and numpy only (made with torch 1.13).
import json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402

MODEL = 'simple_gla'


def rms(x, w, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def conv(C):  # fla ShortConvolution: nn.Conv1d(C, C, 4, groups=C, padding=3, bias=False)
    return nn.Conv1d(C, C, 4, groups=C, padding=3, bias=False)


def short_conv(m, x):  # causal, SiLU; x [B, T, C]
    T = x.shape[1]
    return F.silu(m(x.transpose(1, 2))[..., :T].transpose(1, 2))


class Layer(nn.Module):
    """SimpleGatedLinearAttention(hidden_size=d, num_heads=H, expand_k=1, expand_v=2)."""
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, 2 * d, bias=False); s.g_proj = nn.Linear(d, 2 * d, bias=False)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(2 * d)
        s.gk_proj = nn.Linear(d, H)
        s.g_norm_swish_gate = nn.Module()
        s.g_norm_swish_gate.weight = nn.Parameter(torch.ones(2 * d // H))
        s.o_proj = nn.Linear(2 * d, d, bias=False)

    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H
        q = short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K)
        k = short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K)
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, V)
        g = F.logsigmoid(s.gk_proj(x)) / 16  # [B, T, H]
        S = x.new_zeros(B, H, K, V); o = []
        for t in range(T):
            S = S * g[:, t].exp()[:, :, None, None] + k[:, t, :, :, None] * v[:, t, :, None, :]
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * K ** -0.5, S))
        o = torch.stack(o, 1)
        y = rms(o, s.g_norm_swish_gate.weight) * F.silu(s.g_proj(x).view(B, T, H, V))
        return s.o_proj(y.reshape(B, T, 2 * d))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: Layer(d, H))


def vectors(path):
    I, d, O, L, H, seed, B, T = 5, 16, 7, 2, 4, 3, 2, 70  # T = 32 + 32 + 6: K1's chunks
    x = mimic_common.fixed_input(B, T, I)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    count = sum(p.numel() for p in net.parameters())
    count32 = sum(p.numel() for p in RecNet(I, 32, O, L, H).parameters())
    with torch.no_grad():
        y = net.double()(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla SimpleGatedLinearAttention (bc3b101d; '
                   'hidden_size=d, num_heads=H, expand_k=1, expand_v=2, short convs), float64 '
                   'forward from the float32 initial weights',
           'input': [float(v) for v in x.flatten()],
           'models': {MODEL: {'params': params, 'count': count, 'count_d32': count32,
                              'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print(MODEL, 'parameters: d=16', count, 'd=32', count32)


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('simple_gla', vectors, build)
