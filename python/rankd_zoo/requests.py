"""Deterministic request sets with power-law (Zipf-like) ids, as KServe v2 JSON bodies and as the
padded PyTorch tensors the zoo models take."""
import types

import numpy as np
import torch

from . import models

ZIPF_EXPONENT = 1.05
FAST_ROWS = 1024  # item-scope ragged features of at least this many rows are drawn vectorised


def zipf_ids(rng: np.random.Generator, rows: int, size, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """Ids in [0, rows) whose popularity follows rank^-exponent; hot ids are scattered by a fixed
    multiplicative hash so they are not simply the first rows."""
    u = rng.random(size)
    s = 1.0 - exponent
    rank = np.floor(((rows ** s - 1.0) * u + 1.0) ** (1.0 / s)).astype(np.int64)  # 1..rows
    rank = np.clip(rank, 1, rows)
    return ((rank - 1) * 2654435761 + 97) % rows


class Feature:
    """One model input: dense float/int per row, or ragged ids; item or user scope."""

    def __init__(self, name, kind, scope="item", width=None, rows=None, max_length=None):
        self.name, self.kind, self.scope = name, kind, scope
        self.width, self.rows, self.max_length = width, rows, max_length


def features(name: str, model) -> list:
    """The inputs of a built zoo model (or anything with its `cfg`: features_of)."""
    cfg = model.cfg
    if name in ("dlrm_dcnv2", "dlrm"):
        out = [Feature("dense", "float", width=[cfg.dense])]
        for i, k in enumerate(cfg.ids_per_feature):
            out.append(Feature(f"sparse_{i}", "ragged", rows=cfg.rows_of(i), max_length=k))
        return out
    if name == "din":
        return [Feature("profile", "ids", "user", [8], cfg.profile_rows),
                Feature("seq_items", "ragged", "user", rows=cfg.items, max_length=cfg.max_len),
                Feature("seq_cats", "ragged", "user", rows=cfg.cats, max_length=cfg.max_len),
                Feature("item", "ids", width=[], rows=cfg.items),
                Feature("cat", "ids", width=[], rows=cfg.cats),
                Feature("context", "ids", width=[6], rows=cfg.context_rows)]
    if name == "bst":
        return [Feature("seq", "ragged", "user", rows=cfg.items, max_length=cfg.max_len),
                Feature("user", "ids", "user", [10], cfg.side_rows),
                Feature("item", "ids", width=[], rows=cfg.items),
                Feature("cand", "ids", width=[10], rows=cfg.side_rows)]
    if name == "mmoe":
        return [Feature("sparse", "ids", width=[cfg.sparse], rows=cfg.rows),
                Feature("dense", "float", width=[cfg.dense])]
    raise ValueError(name)


def features_of(name: str, size: str) -> list:
    """The inputs of zoo model `name` at `size`, from its config alone (no weights built)."""
    return features(name, types.SimpleNamespace(cfg=models.config(name, size)))


def make_request(rng, feats, n: int, seq_len=None, allow_empty=False, vectorised=False) -> dict:
    """One request: user features with one row, item features with n rows. With `vectorised`, item
    features' ragged lengths and ids are drawn all at once at every size (the same distribution, other
    draws than the row-by-row ones saved outputs came from; W1's mix was made 100x faster so)."""
    req = {}
    din_seq = None
    for f in feats:
        rows = 1 if f.scope == "user" else n
        if f.kind == "float":
            req[f.name] = rng.lognormal(0.0, 1.0, size=[rows] + f.width).astype(np.float32)
        elif f.kind == "ids":
            req[f.name] = zipf_ids(rng, f.rows, [rows] + f.width)
        elif f.scope == "item" and (rows >= FAST_ROWS or vectorised):
            # Large requests draw all lengths, then all ids, at once (the loop below took minutes for
            # W1 at 32,768 pairs); small ones keep the row-by-row draws their saved outputs came from.
            lengths = rng.integers(0 if allow_empty else 1, f.max_length + 1, size=rows)
            ids = zipf_ids(rng, f.rows, [int(lengths.sum())])
            req[f.name] = np.split(ids, np.cumsum(lengths)[:-1])
        else:
            lists = []
            for r in range(rows):
                if f.scope == "user":
                    hi = min(seq_len or f.max_length, f.max_length)
                    length = int(rng.integers(max(hi // 2, 1), hi + 1))
                    if din_seq is not None:  # paired sequences (items, categories) share lengths
                        length = len(din_seq[r])
                else:
                    length = int(rng.integers(0 if allow_empty else 1, f.max_length + 1))
                lists.append(zipf_ids(rng, f.rows, [length]))
            if f.scope == "user":
                din_seq = lists
            req[f.name] = lists
    return req


def to_json(feats, req: dict, request_id: str, flat_ragged: bool) -> dict:
    inputs = []
    for f in feats:
        v = req[f.name]
        if f.kind == "ragged":
            if flat_ragged:
                values = np.concatenate([np.asarray(row, dtype=np.int64) for row in v]).tolist() if v else []
                inputs.append({"name": f.name, "datatype": "INT64", "shape": [len(values)], "data": values,
                               "parameters": {"lengths": [len(row) for row in v]}})
            else:
                inputs.append({"name": f.name, "datatype": "INT64", "shape": [len(v), -1],
                               "data": [[int(x) for x in row] for row in v]})
        else:
            dt = "FP32" if f.kind == "float" else "INT64"
            inputs.append({"name": f.name, "datatype": dt, "shape": list(v.shape), "data": v.reshape(-1).tolist()})
    return {"id": request_id, "inputs": inputs}


def to_torch(feats, req: dict, n: int, widths=None) -> list:
    """Padded, user-rows-repeated tensors in the model's argument order. Ragged features are padded
    to their longest row, or to widths[name] when given (one width for many requests)."""
    out = []
    for f in feats:
        v = req[f.name]
        if f.kind == "ragged":
            lengths = np.array([len(row) for row in v], dtype=np.int64)
            width = widths[f.name] if widths else max(1, int(lengths.max(initial=0)))
            padded = np.full((len(v), width), -1, dtype=np.int64)
            if lengths.sum() > 0:
                padded[np.arange(width) < lengths[:, None]] = np.concatenate([np.asarray(row, dtype=np.int64) for row in v])
            t = torch.from_numpy(padded)
        else:
            t = torch.from_numpy(np.ascontiguousarray(v))
        if f.scope == "user" and t.shape[0] != n:
            t = t.repeat(*([n] + [1] * (t.dim() - 1)))
        out.append(t)
    return out


def request_set(name: str, model, count: int, seed: int, sizes=(1, 2, 3, 5, 8), seq_len=None, allow_empty=True):
    rng = np.random.default_rng(seed)
    feats = features(name, model)
    reqs = []
    for i in range(count):
        n = int(sizes[i % len(sizes)])
        reqs.append((n, make_request(rng, feats, n, seq_len, allow_empty)))
    return feats, reqs


__all__ = ["zipf_ids", "features", "make_request", "to_json", "to_torch", "request_set", "models"]
