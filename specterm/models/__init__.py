"""Everything that builds, trains, imports or locates models; the engine only loads them.

Two rooms. The runtime, what ``specterm models info|fetch|import``, the engine and the default-pair
logic need at run time:

* ``defaults`` — the default pair (smollm2-agent; the embedded one shipped with specterm as the fallback), and the small pair;
* ``tiny`` — the tiny test pair, built offline in about a minute;
* ``gguf_import``, ``fetch``, ``smollm2_agent`` — real models in: GGUF → a directory vLLM loads;
  SmolLM2 from the package index, and its fine-tuned agent pair;
* ``weights`` — a model's weight bytes, read from its safetensors headers.

And ``training``, the embedded pair's training data and training: the agents' intents, a corpus
from their real tools over their real data, and the reproducible training of tokenizer, target and
draft. The runtime never imports it at module level (the ``[tool.importlinter]`` contract in
pyproject.toml): only a function that builds a pair on demand, or ``specterm models train``, does.

May import ``specterm.engine`` (to load and check what it builds) and ``specterm.agent`` (the corpus
runs the agents' tools); neither imports this package.
"""
