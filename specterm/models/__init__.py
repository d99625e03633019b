"""Everything that builds, trains, imports or locates models; the engine only loads them.

* ``defaults`` — the default pair (smollm2-agent; the embedded one shipped with specterm as the fallback), and the small pair;
* ``tiny`` — the tiny test pair, built offline in about a minute;
* ``corpus``, ``train`` — the embedded pair: a corpus from the agents' real tools over their real
  data, and the reproducible training of tokenizer, target and draft;
* ``gguf_import``, ``fetch`` — real models in: GGUF → a directory vLLM loads; SmolLM2 from the
  package index.

May import ``specterm.engine`` (to load and check what it builds) and ``specterm.agent`` (the corpus
runs the agents' tools); neither imports this package.
"""
