"""The four workloads (W1 dlrm_dcnv2, W2 din, W3 bst, W4 mmoe) in plain PyTorch, and the original
DLRM (dlrm: its dot interaction instead of DCNv2's cross network).

Ragged features arrive the usual PyTorch way: ids padded with -1 to [batch, length], masked.
The definitions use only what torch 1.13 (Debian, for export) and torch 2.x (the GPU peers) share.
Each model has a `tiny` config for tests and a `full` config matching WORKLOADS.md; W1 also an
`mlperf` one (MLPerf's row counts, BF16 tables), too large to build here: bench/mlperf_model.py
writes it.
"""
import math
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from torch import nn


def masked_bag(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Sum-pools rows of `weight` over ids [B, L]; negative ids are empty slots."""
    mask = ids >= 0
    rows = weight[ids.clamp(min=0)]
    if rows.dtype != torch.float32:  # a table kept in 16 bits: its rows summed in FP32
        rows = rows.float()
    return (rows * mask.unsqueeze(-1).to(rows.dtype)).sum(1)


def mlp(sizes: List[int], last_relu: bool = True) -> nn.Sequential:
    layers: List[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------- W1 dlrm_dcnv2
@dataclass
class DLRMConfig:
    dense: int = 13
    ids_per_feature: List[int] = field(default_factory=lambda: [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1])
    rows: int = 200_000
    dim: int = 128
    bottom: List[int] = field(default_factory=lambda: [512, 256, 128])
    cross_layers: int = 3
    cross_rank: int = 512
    top: List[int] = field(default_factory=lambda: [1024, 1024, 512, 256, 1])
    table_rows: Optional[List[int]] = None  # rows of each table, when they differ (else `rows` each)
    table_dtype: torch.dtype = torch.float32

    def rows_of(self, table: int) -> int:
        return self.table_rows[table] if self.table_rows else self.rows


# MLPerf DLRM-v2's row counts (Criteo 1TB, WORKLOADS.md): 204,184,588 rows, 49 GiB in BF16.
MLPERF_ROWS = [40_000_000, 39_060, 17_295, 7_424, 20_265, 3, 7_122, 1_543, 63, 40_000_000, 3_067_956, 405_282, 10,
               2_209, 11_938, 155, 4, 976, 14, 40_000_000, 40_000_000, 40_000_000, 590_152, 12_973, 108, 36]

DLRM_CONFIGS = {
    "tiny": DLRMConfig(rows=1000, dim=8, bottom=[32, 16, 8], cross_rank=16, top=[64, 32, 1],
                       ids_per_feature=[3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 20, 27, 10, 3, 1, 1]),
    "full": DLRMConfig(),
    # Too large to build here: bench/mlperf_model.py exports it with tables of a few rows and writes
    # the real ones straight into the model's external-data file.
    "mlperf": DLRMConfig(table_rows=MLPERF_ROWS, table_dtype=torch.bfloat16),
}


class DLRMDCNv2(nn.Module):
    """MLPerf DLRM-v2: bottom MLP, 26 sum-pooled multi-hot tables, low-rank DCNv2, top MLP."""

    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        self.cfg = cfg
        self.bottom = mlp([cfg.dense] + cfg.bottom)
        self.tables = nn.ModuleList([nn.Embedding(cfg.rows_of(i), cfg.dim, dtype=cfg.table_dtype)
                                     for i in range(len(cfg.ids_per_feature))])
        width = cfg.dim * (len(cfg.ids_per_feature) + 1)
        self.cross_down = nn.ModuleList([nn.Linear(width, cfg.cross_rank, bias=False) for _ in range(cfg.cross_layers)])
        self.cross_up = nn.ModuleList([nn.Linear(cfg.cross_rank, width) for _ in range(cfg.cross_layers)])
        self.top = mlp([width] + cfg.top, last_relu=False)

    def input_names(self):
        return ["dense"] + [f"sparse_{i}" for i in range(len(self.cfg.ids_per_feature))]

    def forward(self, dense, *sparse):
        x = [self.bottom(dense)]
        for table, ids in zip(self.tables, sparse):
            x.append(masked_bag(table.weight, ids))
        x0 = torch.cat(x, 1)
        xl = x0
        for down, up in zip(self.cross_down, self.cross_up):
            xl = x0 * up(down(xl)) + xl
        return torch.sigmoid(self.top(xl))


# ---------------------------------------------------------------- dlrm (the dot interaction)
class DLRMDot(nn.Module):
    """The original DLRM: bottom MLP, sum-pooled tables as wide as its output, the dot products of
    every pair of the 27 vectors (the strict lower triangle, indexed as facebookresearch/dlrm
    does) after the bottom's output, top MLP. Uses DLRMConfig's sizes but for the cross network."""

    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        assert cfg.bottom[-1] == cfg.dim, "the interaction needs the bottom MLP as wide as the tables"
        self.cfg = cfg
        self.bottom = mlp([cfg.dense] + cfg.bottom)
        self.tables = nn.ModuleList([nn.Embedding(cfg.rows, cfg.dim) for _ in cfg.ids_per_feature])
        fields = len(cfg.ids_per_feature) + 1
        self.register_buffer("li", torch.tensor([i for i in range(fields) for j in range(i)]), persistent=False)
        self.register_buffer("lj", torch.tensor([j for i in range(fields) for j in range(i)]), persistent=False)
        self.top = mlp([cfg.dim + fields * (fields - 1) // 2] + cfg.top, last_relu=False)

    def input_names(self):
        return ["dense"] + [f"sparse_{i}" for i in range(len(self.cfg.ids_per_feature))]

    def forward(self, dense, *sparse):
        x = self.bottom(dense)
        t = torch.cat([x] + [masked_bag(table.weight, ids) for table, ids in zip(self.tables, sparse)], 1)
        t = t.view(x.shape[0], -1, self.cfg.dim)
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        return torch.sigmoid(self.top(torch.cat([x, z[:, self.li, self.lj]], 1)))


# ---------------------------------------------------------------- W2 din
@dataclass
class DINConfig:
    profile_rows: int = 100_000
    profile_dim: int = 16
    items: int = 2_000_000
    cats: int = 10_000
    item_dim: int = 32
    context_rows: int = 100_000
    context_dim: int = 16
    max_len: int = 1000


DIN_CONFIGS = {
    "tiny": DINConfig(profile_rows=100, profile_dim=4, items=1000, cats=50, item_dim=8, context_rows=100, context_dim=4, max_len=20),
    "full": DINConfig(),
}


class DIN(nn.Module):
    """Deep Interest Network: target attention of each candidate over the user's behaviour sequence."""

    def __init__(self, cfg: DINConfig):
        super().__init__()
        self.cfg = cfg
        self.profile = nn.ModuleList([nn.Embedding(cfg.profile_rows, cfg.profile_dim) for _ in range(8)])
        self.item = nn.Embedding(cfg.items, cfg.item_dim)
        self.cat = nn.Embedding(cfg.cats, cfg.item_dim)
        self.context = nn.ModuleList([nn.Embedding(cfg.context_rows, cfg.context_dim) for _ in range(6)])
        q = 2 * cfg.item_dim
        self.attention = mlp([4 * q, 80, 40, 1], last_relu=False)
        self.top = mlp([8 * cfg.profile_dim + 2 * q + 6 * cfg.context_dim, 200, 80, 1], last_relu=False)

    def input_names(self):
        return ["profile", "seq_items", "seq_cats", "item", "cat", "context"]

    def forward(self, profile, seq_items, seq_cats, item, cat, context):
        prof = torch.cat([t(profile[:, i]) for i, t in enumerate(self.profile)], 1)
        mask = (seq_items >= 0).to(torch.float32)
        keys = torch.cat([self.item(seq_items.clamp(min=0)), self.cat(seq_cats.clamp(min=0))], 2)
        query = torch.cat([self.item(item), self.cat(cat)], 1)
        q = query.unsqueeze(1).expand_as(keys)
        weights = self.attention(torch.cat([q, keys, q - keys, q * keys], 2)).squeeze(2) * mask
        interest = (weights.unsqueeze(2) * keys).sum(1)
        ctx = torch.cat([t(context[:, i]) for i, t in enumerate(self.context)], 1)
        return torch.sigmoid(self.top(torch.cat([prof, interest, query, ctx], 1)))


# ---------------------------------------------------------------- W3 bst
@dataclass
class BSTConfig:
    items: int = 1_000_000
    dim: int = 64
    max_len: int = 256
    heads: int = 4
    ffn: int = 256
    layers: int = 2
    side_rows: int = 100_000
    side_dim: int = 16


BST_CONFIGS = {
    "tiny": BSTConfig(items=500, dim=16, max_len=12, heads=4, ffn=32, side_rows=50, side_dim=4),
    "full": BSTConfig(),
}


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.ReLU(), nn.Linear(ffn, dim))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x, mask):
        b, length, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).chunk(3, dim=2)
        q = q.reshape(b, length, h, d // h).transpose(1, 2)
        k = k.reshape(b, length, h, d // h).transpose(1, 2)
        v = v.reshape(b, length, h, d // h).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d // h)
        scores = scores.masked_fill(~mask[:, None, None, :], -1e9)
        att = torch.matmul(torch.softmax(scores, dim=3), v).transpose(1, 2).reshape(b, length, d)
        x = self.norm1(x + self.out(att))
        return self.norm2(x + self.ffn(x))


class BST(nn.Module):
    """Behaviour Sequence Transformer: encoder over the user's sequence, candidate attends to it."""

    def __init__(self, cfg: BSTConfig):
        super().__init__()
        self.cfg = cfg
        self.item = nn.Embedding(cfg.items, cfg.dim)
        self.position = nn.Parameter(torch.randn(cfg.max_len, cfg.dim) * 0.1)
        self.encoder = nn.ModuleList([EncoderLayer(cfg.dim, cfg.heads, cfg.ffn) for _ in range(cfg.layers)])
        self.user = nn.ModuleList([nn.Embedding(cfg.side_rows, cfg.side_dim) for _ in range(10)])
        self.cand = nn.ModuleList([nn.Embedding(cfg.side_rows, cfg.side_dim) for _ in range(10)])
        self.top = mlp([2 * cfg.dim + 20 * cfg.side_dim, 256, 128, 1], last_relu=False)

    def input_names(self):
        return ["seq", "user", "item", "cand"]

    def forward(self, seq, user, item, cand):
        mask = seq >= 0
        length = seq.shape[1]
        x = self.item(seq.clamp(min=0)) + self.position[:length].unsqueeze(0)
        for layer in self.encoder:
            x = layer(x, mask)
        query = self.item(item)
        scores = torch.matmul(x, query.unsqueeze(2)).squeeze(2) / math.sqrt(self.cfg.dim)
        scores = scores.masked_fill(~mask, -1e9)
        pooled = (torch.softmax(scores, dim=1).unsqueeze(2) * x).sum(1)
        u = torch.cat([t(user[:, i]) for i, t in enumerate(self.user)], 1)
        c = torch.cat([t(cand[:, i]) for i, t in enumerate(self.cand)], 1)
        return torch.sigmoid(self.top(torch.cat([pooled, query, u, c], 1)))


# ---------------------------------------------------------------- W4 mmoe
@dataclass
class MMoEConfig:
    sparse: int = 20
    rows: int = 100_000
    dim: int = 16
    dense: int = 10
    experts: int = 4
    expert: List[int] = field(default_factory=lambda: [256, 128])
    tower: int = 64


MMOE_CONFIGS = {
    "tiny": MMoEConfig(rows=100, dim=4, expert=[32, 16], tower=8),
    "full": MMoEConfig(),
}


class MMoE(nn.Module):
    """Multi-gate mixture of experts with two tasks (ctr, cvr)."""

    def __init__(self, cfg: MMoEConfig):
        super().__init__()
        self.cfg = cfg
        self.tables = nn.ModuleList([nn.Embedding(cfg.rows, cfg.dim) for _ in range(cfg.sparse)])
        width = cfg.sparse * cfg.dim + cfg.dense
        self.experts = nn.ModuleList([mlp([width] + cfg.expert) for _ in range(cfg.experts)])
        self.gates = nn.ModuleList([nn.Linear(width, cfg.experts) for _ in range(2)])
        self.towers = nn.ModuleList([mlp([cfg.expert[-1], cfg.tower, 1], last_relu=False) for _ in range(2)])

    def input_names(self):
        return ["sparse", "dense"]

    def forward(self, sparse, dense):
        x = torch.cat([t(sparse[:, i]) for i, t in enumerate(self.tables)] + [dense], 1)
        experts = torch.stack([e(x) for e in self.experts], 1)
        outs = []
        for gate, tower in zip(self.gates, self.towers):
            g = torch.softmax(gate(x), dim=1).unsqueeze(2)
            outs.append(torch.sigmoid(tower((g * experts).sum(1))))
        return outs[0], outs[1]


MODELS = {"dlrm_dcnv2": (DLRMDCNv2, DLRM_CONFIGS), "dlrm": (DLRMDot, DLRM_CONFIGS), "din": (DIN, DIN_CONFIGS),
          "bst": (BST, BST_CONFIGS), "mmoe": (MMoE, MMOE_CONFIGS)}


def config(name: str, size: str):
    """The config of model `name` at `size`, without building its weights."""
    return MODELS[name][1][size]


def build(name: str, size: str, seed: int = 0) -> nn.Module:
    """The model `name` (dlrm_dcnv2, dlrm, din, bst, mmoe) with config `size` (tiny, full), weights fixed by seed."""
    torch.manual_seed(seed)
    model = MODELS[name][0](config(name, size))
    with torch.no_grad():  # larger embedding values than N(0,1) / sqrt make differences visible
        for m in model.modules():
            if isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, 0.5)
    return model.eval()
