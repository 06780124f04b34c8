"""A retrieval-style attention task that separates KV storage format from query precision (section 8.4.4).

A document is ``n_records`` records; record i has a key k_i and a value v_i (head dimension d).
Keys share a common direction and a few large outlier channels, as real K projections do, and some
records are near-duplicates of the one asked about (similar six-digit numbers). A question is a
query q close to the target's key. One attention head reads the document:

    p = softmax(q K^T / sqrt(d)),   o = p V,   answer = argmax_i p_i

The answer (the record the head attends to most) is correct when it is the target record; the
output error |o - o_ref| / |o_ref| measures how far the read-out value moved. K and V are stored in a format (``bf16``,
``fp8_e4m3``, ``q8_0``, ``q4_0``; GGML groups of 32 run along the head dimension) and q is
rounded to ``bf16`` or ``fp8_e4m3``; the scores, softmax and sum run in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import instance, non_negative, non_negative_int, one_of, positive, positive_int
from .formats import FORMATS, round_trip

Q_FORMATS = ("bf16", "fp8_e4m3", "fp32")
KV_FORMATS = ("fp32", "bf16", "fp8_e4m3", "q8_0", "q4_0")  # q2_K groups (256) do not fit one 128-wide head


@dataclass(frozen=True)
class Document:
    """One document: keys and values (n_records x d, float32), its name (``n512-r0``) and the record asked about."""

    name: str
    keys: np.ndarray
    values: np.ndarray
    target: int

    def __post_init__(self) -> None:
        if self.keys.shape != self.values.shape or self.keys.ndim != 2:
            raise ValueError("keys and values must be 2-D arrays of the same shape (n_records, d)")
        if not 0 <= self.target < self.keys.shape[0]:
            raise ValueError(f"target must be a record index in [0, {self.keys.shape[0]}), got {self.target}")


@dataclass(frozen=True)
class Question:
    """A query vector, the record it asks about, and which run it is."""

    document: str
    target: int
    run: int
    query: np.ndarray


@dataclass(frozen=True)
class DocumentShape:
    """How a document's keys look: head dimension ``d``, ``near_duplicates`` of the target with cosine similarity
    in ``similarity`` (lo, hi), and ``outlier_channels`` channels raised by ``outlier_scale``."""

    d: int = 128
    near_duplicates: int = 6
    similarity: tuple[float, float] = (0.9, 0.99)
    outlier_channels: int = 4
    outlier_scale: float = 8.0

    def __post_init__(self) -> None:
        positive_int("d", self.d)
        if self.d % 32:
            raise ValueError(f"d must be a multiple of 32 (one q8_0/q4_0 block), got {self.d}")
        non_negative_int("near_duplicates", self.near_duplicates)
        pair = self.similarity
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(_is_real(x) for x in pair)
                and 0 <= pair[0] <= pair[1] < 1):
            raise ValueError(f"similarity must be a range (lo, hi) with 0 <= lo <= hi < 1, got {pair!r:.80}")
        object.__setattr__(self, "similarity", (float(pair[0]), float(pair[1])))
        non_negative_int("outlier_channels", self.outlier_channels)
        non_negative("outlier_scale", self.outlier_scale)


def _is_real(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def make_document(n_records: int, seed: int, name: str = "", shape: DocumentShape = DocumentShape()) -> Document:
    """A seeded document: unit-norm-ish keys with a shared direction and outlier channels; random values."""
    positive_int("n_records", n_records)
    instance("shape", shape, DocumentShape)
    d, near_duplicates = shape.d, shape.near_duplicates
    if not near_duplicates < n_records:
        raise ValueError(f"shape.near_duplicates must lie in [0, n_records), got {near_duplicates}")
    lo, hi = shape.similarity
    outlier_channels, outlier_scale = shape.outlier_channels, shape.outlier_scale
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(d)
    keys = rng.standard_normal((n_records, d)) + 0.5 * shared
    # the target is record 0's neighbourhood: records 1..near_duplicates lean towards it
    sim = rng.uniform(lo, hi, (near_duplicates, 1))
    keys[1:near_duplicates + 1] = sim * keys[0] + np.sqrt(1 - sim**2) * rng.standard_normal((near_duplicates, d))
    channels = rng.choice(d, size=min(outlier_channels, d), replace=False)
    keys[:, channels] += outlier_scale * (1 + 0.02 * rng.standard_normal((n_records, len(channels))))
    values = rng.standard_normal((n_records, d))
    order = rng.permutation(n_records)  # the target is not always the first record
    return Document(name or f"n{n_records}-s{seed}", keys[order].astype(np.float32), values[order].astype(np.float32),
                    int(np.argmax(order == 0)))


def questions(doc: Document, runs: int, seed: int, sharpness: float = 30.0,
              noise: float = 0.05) -> list[Question]:
    """``runs`` questions about the document's target: q ~ sharpness x (centred k_target + noise x e), normalized."""
    positive_int("runs", runs)
    positive("sharpness", sharpness)
    non_negative("noise", noise)
    target = doc.target
    d = doc.keys.shape[1]
    rng = np.random.default_rng(seed)
    centred = doc.keys - doc.keys.mean(axis=0)
    centred[:, np.abs(doc.keys.mean(axis=0)) > 3] = 0  # queries ignore the outlier (bias-like) channels
    base = centred[target] / np.linalg.norm(centred[target])
    out = []
    for run in range(runs):
        e = rng.standard_normal(d) / np.sqrt(d)
        q = base + noise * e
        q = sharpness * np.sqrt(d) * q / np.linalg.norm(q) / np.linalg.norm(centred, axis=1).mean()
        out.append(Question(doc.name, target, run, q.astype(np.float32)))
    return out


def store(x: np.ndarray, fmt: str) -> np.ndarray:
    """``x`` as kept in ``fmt`` and read back (float32); ``fp32`` keeps it as is."""
    if fmt == "fp32":
        return np.asarray(x, dtype=np.float32)
    one_of("fmt", fmt, FORMATS)
    return round_trip(x, fmt)


def attend(q: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One head in float32: (attention weights p, output o = p V)."""
    d = keys.shape[1]
    s = (keys @ q) / np.float32(np.sqrt(d))
    s -= s.max()
    p = np.exp(s)
    p /= p.sum()
    return p, p @ values


def run_grid(docs: list[Document], runs: int, kv_formats: list[str], q_formats: list[str],
             seed: int = 0) -> pd.DataFrame:
    """Every question under every (KV format, Q format): one row each with correctness and output error.

    Columns: document, task (1-based), run, kv, q, answer, correct, out_rel_err (relative L2 error of
    o against float32 K, V and q), target_weight (attention weight on the target).
    """
    for f in kv_formats:
        one_of("kv_formats", f, KV_FORMATS)
    for f in q_formats:
        one_of("q_formats", f, Q_FORMATS)
    rows = []
    for task, doc in enumerate(docs, start=1):
        target = doc.target
        stored = {f: (store(doc.keys, f), store(doc.values, f)) for f in kv_formats}
        for qu in questions(doc, runs, seed + 7919 * task):
            _, ref = attend(qu.query, doc.keys, doc.values)
            q_by_fmt = {f: store(qu.query, f) for f in q_formats}
            for kvf, (k, v) in stored.items():
                for qf, q in q_by_fmt.items():
                    p, o = attend(q, k, v)
                    a = int(np.argmax(p))
                    rows.append((doc.name, task, qu.run + 1, kvf, qf, a, a == target,
                                 float(np.linalg.norm(o - ref) / np.linalg.norm(ref)), float(p[target])))
    return pd.DataFrame(rows, columns=["document", "task", "run", "kv", "q", "answer", "correct", "out_rel_err",
                                       "target_weight"])


def chapter_like_documents(seed: int = 0, shape: DocumentShape = DocumentShape()) -> list[Document]:
    """Eight documents laid out as in the chapter's experiment: n128-r0..r3, then n512-r0..r3 (tasks 1-8)."""
    return [make_document(n, seed * 1000 + (0 if n == 128 else 100) + r, f"n{n}-r{r}", shape)
            for n in (128, 512) for r in range(4)]


def summary(grid: pd.DataFrame) -> pd.DataFrame:
    """Per (KV format, Q format): correct answers, total, and mean/max attention-output error."""
    g = grid.groupby(["kv", "q"], sort=False)
    return pd.DataFrame({"correct": g["correct"].sum().astype(int), "runs": g.size(),
                         "mean_err": g["out_rel_err"].mean(), "max_err": g["out_rel_err"].max()})
