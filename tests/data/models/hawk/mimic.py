#!/usr/bin/env python3
"""Pure-PyTorch mimic of the benchmark's RecNet with Hawk's residual block (src/layers/hawk.c),
laid out as Griffin's reference PyTorch code lays it out (google-deepmind/recurrentgemma,
recurrentgemma/torch: layers.py's RMSNorm, BlockDiagonalLinear, rnn_scan, rnn_param_init,
RGLRU, Conv1D and modules.py's RecurrentBlock, MLPBlock, ResidualBlock), written anew here with
our state_dict names (De et al. 2024, Griffin/Hawk, section 2).

  python3 mimic.py vectors OUT.json   the reference of tests/unit/test_hawk.c (both
                                      of its builds; committed as hawk.json; torch 1.13)
  python3 mimic.py check CKPT DUMP    a selectivbench checkpoint of --model hawk and the file of
                                      `selectivbench eval CKPT --dump DUMP`: loads the
                                      checkpoint (strict), runs the dumped inputs, compares the
                                      logits; one line, exit 1 when they differ by more than 1e-4
                                      (relative to max(1, largest logit))

What the reference computes and this mimic follows (docs/models/hawk.md):
  - the RG-LRU treats each sequence's first position as a reset: there the recurrence weight
    a_0 is zeroed and the input is not scaled by sqrt(1 - a_0^2), so h_0 = i_0 x_0;
  - GeLU is the tanh form, in the recurrent block and in the MLP;
  - the decay parameter is drawn by rnn_param_init on the ring [0.9, 0.999]: a0^2 uniform.
Where this mimic departs from the reference on purpose:
  - names and layouts are ours (checkpoints load into it by name): RMSNorm's `weight` is the
    reference's 1 + scale; the gate blocks are rg_lru.{input,a}_gate_{weight,bias} ([H, W, W]
    and [H, W], the reference's BlockDiagonalLinear w and b); the convolution's weight is
    nn.Conv1d's [R, 1, 4] (the reference's w[k, c] is weight[c, 0, k]); the MLP's two input
    projections are gate_proj and up_proj (the reference's ffw_up holds both in one tensor);
    rg_lru.a_logit is the paper's Lambda, minus the reference's a_param;
  - rnn_scan accumulates in the input's precision (the reference keeps float32 for bf16
    runs), so that the float64 forward is float64 throughout;
  - the square root's slope is not clipped (the reference's SqrtBoundDerivative changes only
    the backward, which this forward-only mimic never runs);
  - the initialisation other than Lambda's is the benchmark's (LeCun-uniform weights, zero
    biases, nn.Conv1d's default for the convolution; the reference draws normals).
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

C_EXP = 8.0          # the paper's constant c
MIN_RAD, MAX_RAD = 0.9, 0.999   # rnn_param_init's ring
CONV = 4
EPS = 1e-6


def dims(d, H):
    W = -(-4 * d // (3 * H))   # ceil(4 d / (3 H))
    return W, H * W


def gelu(x):
    """the reference's GeLU: the tanh form"""
    return F.gelu(x, approximate='tanh')


def rnn_param_init_(t, min_rad, max_rad, eps=1e-8):
    """rnn_param_init in place: a^2 ~ U(min_rad^2 + eps, max_rad^2 + eps) (torch's float32
    draws), then the inverse of a = exp(-softplus(param)): param = log(1/a - 1), formed in
    double as hawk.c does (the reference takes these steps in float32 with torch's log and
    exp, which can differ in the last place; the distribution is the same)"""
    t.uniform_(min_rad ** 2 + eps, max_rad ** 2 + eps)
    vals = [math.log(math.expm1(-0.5 * math.log(u))) for u in t.tolist()]
    return t.copy_(torch.tensor(vals, dtype=torch.float64))


def rnn_scan(x, a, reset, h0=None):
    """h_t = a_t h_{t-1} + x_t over dim 1, a zeroed where reset [B, T] is set"""
    a = a * ~reset[..., None]
    h = x.new_zeros(x[:, 0].shape) if h0 is None else h0
    y = torch.zeros_like(x)
    for t in range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        y[:, t] = h
    return y, h


def block_diagonal_linear(x, w, b):
    """x [..., H W], w [H, W, W] (input index first), b [H, W]"""
    H = w.shape[0]
    xs = x.reshape(*x.shape[:-1], H, x.shape[-1] // H)
    y = torch.einsum('...hi,hij->...hj', xs, w) + b
    return y.reshape(x.shape)


class Lin(nn.Module):
    """a Linear whose parameters are drawn by Hawk.reset (no draws at construction)"""
    def __init__(s, i, o):
        super().__init__()
        s.weight = nn.Parameter(torch.empty(o, i))
        s.bias = nn.Parameter(torch.empty(o))

    def forward(s, x):
        return F.linear(x, s.weight, s.bias)


class RMSNorm(nn.Module):
    """x / sqrt(mean x^2 + eps) * weight; weight = the reference's 1 + scale"""
    def __init__(s, d):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(d))

    def forward(s, x):
        var = torch.mean(torch.square(x), dim=-1, keepdim=True)
        return x * torch.rsqrt(var + EPS) * s.weight


class Conv1D(nn.Module):
    """causal depthwise temporal convolution of width 4 with bias, one shift at a time"""
    def __init__(s, R):
        super().__init__()
        s.weight = nn.Parameter(torch.empty(R, 1, CONV))   # nn.Conv1d's layout
        s.bias = nn.Parameter(torch.empty(R))

    def forward(s, x):   # x [B, T, R]; one document per sequence: no document mask
        T = x.shape[1]
        out = 0.0
        for shift in range(min(CONV, T)):
            window = F.pad(x[:, :T - shift], (0, 0, shift, 0))   # x_{t - shift}, zeros before 0
            out = out + window * s.weight[:, 0, CONV - 1 - shift]
        return out + s.bias


class RGLRU(nn.Module):
    def __init__(s, R, H, W):
        super().__init__()
        s.a_logit = nn.Parameter(torch.empty(R))          # Lambda = -a_param
        s.input_gate_weight = nn.Parameter(torch.empty(H, W, W))
        s.input_gate_bias = nn.Parameter(torch.empty(H, W))
        s.a_gate_weight = nn.Parameter(torch.empty(H, W, W))
        s.a_gate_bias = nn.Parameter(torch.empty(H, W))

    def forward(s, x, segment_pos):   # x [B, T, R], segment_pos [B, T]
        reset = segment_pos == 0
        gate_x = torch.sigmoid(block_diagonal_linear(x, s.input_gate_weight, s.input_gate_bias))
        gate_a = torch.sigmoid(block_diagonal_linear(x, s.a_gate_weight, s.a_gate_bias))
        a_param = -s.a_logit
        log_a = -C_EXP * gate_a * F.softplus(a_param)
        a = torch.exp(log_a)
        a_square = torch.exp(2 * log_a)
        gated_x = x * gate_x
        multiplier = torch.sqrt(1 - a_square)
        multiplier = reset[..., None] + ~reset[..., None] * multiplier   # 1 at a reset
        y, _ = rnn_scan(gated_x * multiplier, a, reset)
        return y


class RecurrentBlock(nn.Module):
    def __init__(s, d, R, H, W):
        super().__init__()
        s.linear_y = Lin(d, R)
        s.linear_x = Lin(d, R)
        s.conv_1d = Conv1D(R)
        s.rg_lru = RGLRU(R, H, W)
        s.linear_out = Lin(R, d)

    def forward(s, x, segment_pos):
        y = gelu(s.linear_y(x))
        x = s.conv_1d(s.linear_x(x))
        x = s.rg_lru(x, segment_pos)
        return s.linear_out(x * y)


class MLPBlock(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.gate_proj = Lin(d, 3 * d)
        s.up_proj = Lin(d, 3 * d)
        s.down_proj = Lin(3 * d, d)

    def forward(s, x):
        return s.down_proj(gelu(s.gate_proj(x)) * s.up_proj(x))


def lecun_(w, fan_in):
    b = math.sqrt(3.0 / fan_in)
    nn.init.uniform_(w, -b, b)


class Hawk(nn.Module):
    """Hawk's residual block minus its input: the reference's ResidualBlock gives
    x + Hawk(x) (RecNet adds x and normalises)"""
    def __init__(s, d, H):
        super().__init__()
        W, R = dims(d, H)
        s.temporal_pre_norm = RMSNorm(d)
        s.temporal_block = RecurrentBlock(d, R, H, W)
        s.channel_pre_norm = RMSNorm(d)
        s.mlp_block = MLPBlock(d)
        s.reset(d, R, W)

    @torch.no_grad()
    def reset(s, d, R, W):
        tb, lru, mlp = s.temporal_block, s.temporal_block.rg_lru, s.mlp_block
        lecun_(tb.linear_y.weight, d)
        lecun_(tb.linear_x.weight, d)
        nn.init.kaiming_uniform_(tb.conv_1d.weight, a=math.sqrt(5))   # nn.Conv1d's default
        nn.init.uniform_(tb.conv_1d.bias, -1 / math.sqrt(CONV), 1 / math.sqrt(CONV))
        a_param = rnn_param_init_(torch.empty(R), MIN_RAD, MAX_RAD)
        lru.a_logit.copy_(-a_param)
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
        B, T = x.shape[:2]
        segment_pos = torch.arange(T).expand(B, T)   # one sequence per sample, from 0
        raw_x = x
        r = s.temporal_block(s.temporal_pre_norm(raw_x), segment_pos)
        residual = r + raw_x
        return r + s.mlp_block(s.channel_pre_norm(residual))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: Hawk(d, H))


def param_records(net):
    """mimic_common's records plus sampled values the C tests compare bit for bit: every
    Lambda (the float32 steps of rnn_param_init), the first, middle and last of the others"""
    records = mimic_common.param_records(net)
    for rec, t in zip(records, net.state_dict().values()):
        flat = t.flatten()
        n = flat.numel()
        at = list(range(n)) if rec['name'].endswith('a_logit') else sorted({0, n // 2, n - 1})
        rec['at'] = at
        rec['values'] = [float(flat[i]) for i in at]
    return records


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 37
    x = mimic_common.fixed_input(B, T, I)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = param_records(net)
    counts = {}
    for dd in (16, 32):
        counts[str(dd)] = sum(p.numel() for p in RecNet(I, dd, O, L, heads(dd)).parameters())
    net64 = net.double()
    with torch.no_grad():
        y = net64(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with Hawk (tests/data/models/hawk/mimic.py, '
                   'laid out as recurrentgemma\'s torch modules), float32 parameters, float64 '
                   'forward',
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
