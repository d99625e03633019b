"""specterm's own error types. Each carries one line a user can act on; the CLI prints it as
``specterm: error: <message>`` and exits non-zero, never with a traceback."""


class SpectermError(Exception):
    """Base class: ``str(err)`` is a complete one-line message."""

    exit_code = 2


class ConfigError(SpectermError):
    """Bad configuration: flags, config file, environment, schema files."""


class ModelError(SpectermError):
    """A model path that does not exist or is not a model, or an incompatible pair."""


class EngineUnavailable(SpectermError):
    """The vLLM engine extra is not installed, or the engine failed to start."""


class SessionFileError(SpectermError):
    """A session file that cannot be read (corrupt, wrong shape, unknown version)."""


def first_error(err) -> tuple[tuple, str]:
    """The first error of a pydantic ``ValidationError`` as (location, message): the one line a
    user sees, without pydantic's "Value error, " prefix (the one place that shape is read)."""
    e = err.errors()[0]
    return tuple(e["loc"]), str(e["msg"]).removeprefix("Value error, ")
