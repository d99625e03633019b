"""JSON Schema checks for structured output, done before anything reaches the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specterm.errors import ConfigError


def check_json_schema(schema: Any) -> None:
    """Raise ``ConfigError`` unless ``schema`` is a valid JSON Schema (Draft 2020-12 metaschema)."""
    import jsonschema

    if not isinstance(schema, dict):
        raise ConfigError(f"a JSON schema must be an object, got {type(schema).__name__}")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise ConfigError(f"not a valid JSON Schema at {where}: {err.message}") from None


def load_schema_file(path: str | Path) -> dict[str, Any]:
    """Read and validate a schema file; every failure is one ``ConfigError`` line naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read schema file {path}: {err}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"schema file {path} is not JSON: {err.msg} at line {err.lineno}") from None
    try:
        check_json_schema(schema)
    except ConfigError as err:
        raise ConfigError(f"schema file {path}: {err}") from None
    return schema
