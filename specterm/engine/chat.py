"""Prompts as messages, rendered by the model's own chat template — the one path every prompt takes.

A ``ChatPrompt`` is what chat, ``run``, the agent loop and the bench send: messages (``system``,
``user``, ``assistant``, ``tool``), optional ``tools`` (OpenAI-style function specs, the
``tools=`` convention of Hugging Face chat templates) and optional ``documents`` (retrieved
passages, the ``documents=`` convention). ``PromptRenderer`` renders it with the target tokenizer's
``apply_chat_template`` — the format the model was trained on, hub model or embedded pair alike —
and tokenizes the result without adding special tokens again (the template already wrote them).

Templates differ in what they accept; what a template does not mention is folded into the system
message as plain text, so nothing is silently dropped: tools as one line each, passages as
``[title] text`` lines. A raw ``str`` prompt skips all of this (``--raw``: text completion).

Errors are one line (``ChatTemplateError``): no template (say ``--raw`` or ``--chat-template``),
a template that raises (its own message), and a prompt longer than the model's context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from specterm.errors import ConfigError

Role = Literal["system", "user", "assistant", "tool"]


class ChatTemplateError(ConfigError):
    """The prompt cannot be rendered for this model (one line, says what to do)."""


class PromptTooLong(ConfigError):
    """The rendered prompt does not fit the model's context."""


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    """An assistant's calls, HF's convention (``{"type": "function", "function": {"name", "arguments"}}``,
    arguments an object); a template that does not mention ``tool_calls`` gets them as content text."""


class ChatPrompt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    documents: list[dict[str, str]] | None = None
    """Retrieved passages: ``{"title": ..., "text": ...}``."""

    @classmethod
    def user(cls, text: str, system: str | None = None) -> ChatPrompt:
        msgs = ([Message(role="system", content=system)] if system else []) + [Message(role="user", content=text)]
        return cls(messages=msgs)


Prompt = str | ChatPrompt
"""A raw completion prompt (``str``) or a conversation."""


def tool_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


class PromptRenderer:
    """Renders ``Prompt``s to token ids for one tokenizer (the target's)."""

    def __init__(self, tokenizer: Any, *, template_file: str | None = None, model: str = "the model") -> None:
        self.tokenizer, self.model = tokenizer, model
        if template_file:
            path = Path(template_file).expanduser()
            try:
                tokenizer.chat_template = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ChatTemplateError(f"cannot read chat template file {template_file}: {err}") from None

    @property
    def template(self) -> str | None:
        t = getattr(self.tokenizer, "chat_template", None)
        if isinstance(t, dict):  # named templates: the default one (tool_use is picked by HF when tools are given)
            t = t.get("default") or next(iter(t.values()), None)
        return t or None

    @property
    def can_chat(self) -> bool:
        return self.template is not None

    def text(self, prompt: Prompt) -> str:
        """The exact text the model sees."""
        if isinstance(prompt, str):
            return prompt
        template = self.template
        if template is None:
            raise ChatTemplateError(
                f"{self.model} has no chat template: send the text as-is with --raw, or give one with "
                "--chat-template FILE"
            )
        messages = [m.model_dump(exclude_none=True) for m in prompt.messages]
        if "tool_calls" not in template:
            for m in messages:
                if calls := m.pop("tool_calls", None):
                    m["content"] = "\n".join([m["content"], *(json.dumps(c["function"]) for c in calls)]).strip()
        tools, documents = prompt.tools or None, prompt.documents or None
        folded = []
        if tools and "tools" not in template:
            folded.append("Tools:\n" + "\n".join(_tool_text(t) for t in tools))
            tools = None
        if documents and "documents" not in template:
            folded.append("Context:\n" + "\n".join(f"[{d['title']}] {d['text']}" for d in documents))
            documents = None
        if folded:
            if messages and messages[0]["role"] == "system":
                messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + "\n\n".join(folded)}
            else:
                messages.insert(0, {"role": "system", "content": "\n\n".join(folded)})
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools, documents=documents, add_generation_prompt=True, tokenize=False
            )
        except Exception as err:  # noqa: BLE001 - jinja2 and template bugs raise many types
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            raise ChatTemplateError(
                f"{self.model}'s chat template refused the prompt: {lines[0] if lines else type(err).__name__}"
            ) from None

    def ids(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        return list(self.tokenizer(self.text(prompt), add_special_tokens=False)["input_ids"])


def check_fits(n_prompt: int, max_model_len: int) -> None:
    """One line when a prompt leaves no room to generate a token."""
    if n_prompt >= max_model_len:
        raise PromptTooLong(
            f"the prompt is {n_prompt} tokens, but the model's context is {max_model_len} "
            "tokens (--max-model-len); shorten the prompt"
        )


def _tool_text(tool: dict[str, Any]) -> str:
    f = tool.get("function", tool)
    import json

    return f"- {f['name']}: {f.get('description', '')} Parameters (JSON Schema): {json.dumps(f.get('parameters', {}))}"
