"""The embedded pair's training data and training: nothing here is needed to run a model.

* ``intents_sql``, ``intents_ops``, ``intents_broad`` (on ``intent_base``) — what the agents are
  asked: question shapes with their training and held-out phrasings, the tool calls that answer
  them, and their answers; ``intents`` samples them (entities from the agents' data, rewordings);
* ``corpus`` — agent transcripts made by running those questions through the real tools (the
  training corpus, the held-out evaluation cases, the shipped agents' ``examples.toml``);
* ``train`` — the reproducible training of tokenizer, target and draft (``specterm models train``).

The runtime (``specterm.models``' other modules, the engine, the CLI) never imports this package at
module level; a function that builds a pair on demand imports it inside itself (the
``[tool.importlinter]`` contract in pyproject.toml, tests/test_import_contracts.py).
"""
