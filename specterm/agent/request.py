"""A user's request as the agent loop accepts it: non-empty UTF-8 text, at most 8 KB, with no control
characters other than tab and newline. Refused text gets one line saying why (``validate_request``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ValidationError, field_validator

from specterm.errors import first_error

MAX_INPUT_BYTES = 8192
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class UserRequest(BaseModel):
    """A user's request as the loop accepts it (see the module doc for the rules)."""

    text: str

    @field_validator("text")
    @classmethod
    def _check(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty request")
        try:
            size = len(v.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("request is not valid UTF-8 text (binary input is refused)") from None
        if size > MAX_INPUT_BYTES:
            raise ValueError(f"request too large: {size} bytes (limit {MAX_INPUT_BYTES})")
        bad = _CONTROL.search(v)
        if bad:
            raise ValueError(
                f"request contains control character U+{ord(bad.group()):04X} at "
                f"position {bad.start()} (binary input is refused)"
            )
        return v


def validate_request(text: str) -> str | None:
    """None when ``text`` is acceptable, else the one-line reason."""
    try:
        UserRequest(text=text)
    except ValidationError as err:
        return first_error(err)[1]
    return None
