#!/usr/bin/env python3
"""Pure-PyTorch mimic of the benchmark's RecNet with Hawk's residual block (src/layers/hawk.c),
written from the equations of De et al. 2024 (Griffin/Hawk, section 2); there is no fla layer.

  python3 mimic.py vectors OUT.json   the reference of tests/unit/test_hawk.c and
                                      test_hawk_float.c (committed as hawk.json; torch 1.13)
  python3 mimic.py check CKPT DUMP    a selectivbench checkpoint of --model hawk and the file of
                                      `selectivbench eval CKPT --dump DUMP`: loads the
                                      checkpoint (strict), runs the dumped inputs, compares the
                                      logits; one line, exit 1 when they differ by more than 1e-4
                                      (relative to max(1, largest logit))

Parameters are created empty and drawn afterwards in the order src/layers/hawk.c gives as draw
ranks, so that torch.manual_seed(seed) gives the C model's initial values bit for bit.
Needs only torch and numpy.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402

torch.set_default_dtype(torch.float32)

C_EXP = 8.0             # the paper's constant c
A_POW_LO, A_POW_HI = 0.9, 0.999   # a0^c uniform in [lo, hi] at init
CONV = 4
EPS = 1e-6


def dims(d, H):
    W = -(-4 * d // (3 * H))   # ceil(4 d / (3 H))
    return W, H * W


class Lin(nn.Module):
    """a Linear whose parameters are drawn by Hawk.reset (no draws at construction)"""
    def __init__(s, i, o):
        super().__init__()
        s.weight = nn.Parameter(torch.empty(o, i))
        s.bias = nn.Parameter(torch.empty(o))

    def forward(s, x):
        return F.linear(x, s.weight, s.bias)


class RMSNorm(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(d))

    def forward(s, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * s.weight


class RGLRU(nn.Module):
    def __init__(s, R, H, W):
        super().__init__()
        s.H, s.W = H, W
        s.a_logit = nn.Parameter(torch.empty(R))          # Lambda: a0 = sigmoid(Lambda)
        s.input_gate_weight = nn.Parameter(torch.empty(H, W, W))
        s.input_gate_bias = nn.Parameter(torch.empty(H, W))
        s.a_gate_weight = nn.Parameter(torch.empty(H, W, W))
        s.a_gate_bias = nn.Parameter(torch.empty(H, W))

    def block(s, x, w, b):
        xs = x.reshape(*x.shape[:-1], s.H, s.W)
        return (torch.einsum('...hi,hij->...hj', xs, w) + b).reshape(x.shape)

    def forward(s, x):   # x [B, T, R], h_{-1} = 0, step by step
        r = torch.sigmoid(s.block(x, s.a_gate_weight, s.a_gate_bias))
        i = torch.sigmoid(s.block(x, s.input_gate_weight, s.input_gate_bias))
        log_a = -C_EXP * F.softplus(-s.a_logit) * r
        a = torch.exp(log_a)
        mult = torch.sqrt(-torch.expm1(2 * log_a))       # sqrt(1 - a^2), stable near a = 1
        u = mult * (i * x)
        h = x.new_zeros(x.shape[0], x.shape[2])
        out = []
        for t in range(x.shape[1]):
            h = a[:, t] * h + u[:, t]
            out.append(h)
        return torch.stack(out, 1)


class TemporalBlock(nn.Module):
    def __init__(s, d, R, H, W):
        super().__init__()
        s.R = R
        s.linear_y = Lin(d, R)
        s.linear_x = Lin(d, R)
        s.conv_1d = nn.Module()
        s.conv_1d.weight = nn.Parameter(torch.empty(R, 1, CONV))
        s.conv_1d.bias = nn.Parameter(torch.empty(R))
        s.rg_lru = RGLRU(R, H, W)
        s.linear_out = Lin(R, d)

    def forward(s, x):
        T = x.shape[1]
        y = F.gelu(s.linear_y(x))
        xb = s.linear_x(x).transpose(1, 2)
        xb = F.conv1d(xb, s.conv_1d.weight, s.conv_1d.bias, padding=CONV - 1, groups=s.R)
        xb = xb[..., :T].transpose(1, 2)
        return s.linear_out(y * s.rg_lru(xb))


class MLP(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.gate_proj = Lin(d, 3 * d)
        s.up_proj = Lin(d, 3 * d)
        s.down_proj = Lin(3 * d, d)

    def forward(s, x):
        return s.down_proj(F.gelu(s.gate_proj(x)) * s.up_proj(x))


def lecun_(w, fan_in):
    b = math.sqrt(3.0 / fan_in)
    nn.init.uniform_(w, -b, b)


class Hawk(nn.Module):
    """Hawk's residual block minus its input: x + Hawk(x) is the paper's block output"""
    def __init__(s, d, H):
        super().__init__()
        W, R = dims(d, H)
        s.temporal_pre_norm = RMSNorm(d)
        s.temporal_block = TemporalBlock(d, R, H, W)
        s.channel_pre_norm = RMSNorm(d)
        s.mlp_block = MLP(d)
        s.reset(d, R, W)

    @torch.no_grad()
    def reset(s, d, R, W):
        tb, lru, mlp = s.temporal_block, s.temporal_block.rg_lru, s.mlp_block
        lecun_(tb.linear_y.weight, d)
        lecun_(tb.linear_x.weight, d)
        nn.init.kaiming_uniform_(tb.conv_1d.weight, a=math.sqrt(5))   # nn.Conv1d's default
        nn.init.uniform_(tb.conv_1d.bias, -1 / math.sqrt(CONV), 1 / math.sqrt(CONV))
        u = torch.empty(R).uniform_(0, 1).tolist()
        lam = []
        for v in u:   # in double with the C library's log and pow (Python's math)
            a0 = math.pow(A_POW_LO + v * (A_POW_HI - A_POW_LO), 1.0 / C_EXP)
            lam.append(math.log(a0) - math.log1p(-a0))
        lru.a_logit.copy_(torch.tensor(lam, dtype=torch.float64).float())
        lecun_(lru.input_gate_weight, W)
        lecun_(lru.a_gate_weight, W)
        lecun_(tb.linear_out.weight, R)
        lecun_(mlp.gate_proj.weight, d)
        lecun_(mlp.up_proj.weight, d)
        lecun_(mlp.down_proj.weight, 3 * d)
        for b in (tb.linear_y.bias, tb.linear_x.bias, lru.input_gate_bias, lru.a_gate_bias,
                  tb.linear_out.bias, mlp.gate_proj.bias, mlp.up_proj.bias, mlp.down_proj.bias):
            b.zero_()

    def forward(s, x):
        r = s.temporal_block(s.temporal_pre_norm(x))
        return r + s.mlp_block(s.channel_pre_norm(x + r))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: Hawk(d, H))


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 37
    torch.manual_seed(1234)
    x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)],
                     dtype=torch.float64)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    counts = {}
    for dd in (16, 32):
        counts[str(dd)] = sum(p.numel() for p in RecNet(I, dd, O, L, heads(dd)).parameters())
    net64 = net.double()
    with torch.no_grad():
        y = net64(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with Hawk (tests/data/models/hawk/mimic.py), '
                   'float32 parameters, float64 forward',
           'input': [float(v) for v in x.flatten()],
           'counts': counts,
           'models': {'hawk': {'params': params, 'count': counts['16'],
                               'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    with open(path, 'w') as f:
        json.dump(out, f, separators=(',', ':'))
    print('parameter counts', counts)


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('hawk', vectors, build, relative=True)
