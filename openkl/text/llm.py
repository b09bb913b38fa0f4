"""An OpenAI-compatible chat client shared by every feature that can use an LLM.

Works with anything that speaks `/v1/chat/completions`: Ollama, llama.cpp server, vLLM,
LiteLLM, OpenAI. Settings come from `llm.*` in config (or `OK_LLM_*`); the key is read from
the environment variable named by `llm.api_key_env` and is never written anywhere.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..errors import OkError


class LLMError(OkError):
    """The endpoint failed, timed out, or answered with something unusable."""


class LLMNotConfigured(OkError):
    """No LLM endpoint is configured."""


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    model: str
    api_key: str | None
    timeout: float = 60.0
    retries: int = 2

    @property
    def label(self) -> str:
        return f"{self.model} @ {self.base_url}"


def _is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


ROLES = ("chat", "extract")


def _role_setting(folder: Any, role: str | None, name: str) -> Any:
    """`llm.<role>.<name>`, else `llm.<name>`."""
    if role:
        value = folder.setting(f"llm.{role}.{name}")
        if value is not None:
            return value
    return folder.setting(f"llm.{name}")


def _key_env(folder: Any, role: str | None) -> str:
    if role:
        named = folder.secret_env(f"llm.{role}.api_key_env")
        if named:
            return named
    return folder.secret_env("llm.api_key_env") or ""


def configured(folder: Any, role: str | None = None) -> bool:
    """Whether an endpoint is set for `role` (or `llm.base_url`), without checking it."""
    return bool(_role_setting(folder, role, "base_url"))


def model_of(folder: Any, role: str | None = None) -> str | None:
    """The model `role` uses (`llm.<role>.model`, else `llm.model`)."""
    model = _role_setting(folder, role, "model")
    return str(model) if model else None


def config_from(folder: Any, required: bool = True, role: str | None = None) -> LLMConfig | None:
    """Validated settings, or None when no LLM is configured and `required` is False.
    `role` (`chat` or `extract`) reads `llm.<role>.*` first, each unset key falling back
    to `llm.*`.

    Fails before any work is done: a missing model or key is reported with the fix.
    """
    pre = f"llm.{role}." if role and folder.setting(f"llm.{role}.base_url") else "llm."
    base = _role_setting(folder, role, "base_url")
    model = _role_setting(folder, role, "model")
    if not base:
        if required:
            raise LLMNotConfigured(
                "no LLM is configured",
                "set llm.base_url and llm.model in .ok/config.yml "
                "(or OK_LLM_BASE_URL / OK_LLM_MODEL)",
            )
        return None
    return _checked(folder, pre, str(base), model, _key_env(folder, role))


def _checked(folder: Any, pre: str, base: str, model: Any, key_env: str) -> LLMConfig:
    if not base.startswith(("http://", "https://")):
        raise LLMError(
            f"{pre}base_url {base!r} is not an http(s) URL",
            "e.g. http://localhost:11434/v1 for Ollama",
        )
    if not model:
        raise LLMError(f"{pre}base_url is set but no model is", f"set {pre}model (or llm.model)")
    key = os.environ.get(key_env) if key_env else None
    if key_env and not key and not _is_loopback(base):
        raise LLMError(
            f"the API key variable {key_env} is not set",
            f"export {key_env}=… (keys are read from the environment only)",
        )
    return LLMConfig(
        base_url=base.rstrip("/"),
        model=str(model),
        api_key=key,
        timeout=folder.setting("llm.timeout"),
        retries=folder.setting("llm.retries"),
    )


@dataclass(frozen=True)
class ChatPair:
    """The chat model, and the larger one that answers when the evidence is weak (the best
    passage's cosine similarity under `below`) or the chat model fails."""

    fast: LLMConfig
    fallback: LLMConfig | None = None
    below: float = 0.0

    def pick(self, best: float | None) -> tuple[LLMConfig, str | None]:
        """The model to ask first given the best passage's similarity, and why, when it is
        the fallback."""
        if self.fallback is None or best is None or best >= self.below:
            return self.fast, None
        return self.fallback, f"the best passage's similarity {best:.2f} is under {self.below:g}"


def chat_pair(folder: Any, required: bool = True) -> ChatPair | None:
    """The chat endpoint (`llm.chat.*`, else `llm.*`) with its fallback model, if one is
    set (`llm.chat.fallback_*`)."""
    fast = config_from(folder, required=required, role="chat")
    if fast is None:
        return None
    model = folder.setting("llm.chat.fallback_model")
    if not model:
        return ChatPair(fast)
    base = folder.setting("llm.chat.fallback_base_url")
    fallback = (
        _checked(folder, "llm.chat.fallback_", str(base), model, _key_env(folder, "chat"))
        if base
        else LLMConfig(fast.base_url, str(model), fast.api_key, fast.timeout, fast.retries)
    )
    below = float(folder.setting("llm.chat.fallback_below"))
    if not 0.0 <= below <= 1.0:
        raise LLMError(
            f"llm.chat.fallback_below = {below:g} is out of range",
            "use a cosine similarity from 0 to 1 (`ok config set llm.chat.fallback_below 0.5`)",
        )
    return ChatPair(fast, fallback, below)


def describe(folder: Any) -> str:
    """One line naming the chat and extraction models (no request is made): `chat:
    qwen2.5:0.5b @ http://…, fallback …; extraction: local rules`."""
    parts = []
    for role in ROLES:
        base = _role_setting(folder, role, "base_url")
        model = _role_setting(folder, role, "model")
        name = "chat" if role == "chat" else "extraction"
        if not base:
            parts.append(f"{name}: none" if role == "chat" else f"{name}: local rules")
            continue
        text = f"{name}: {model or '(no model set)'} @ {str(base).rstrip('/')}"
        if role == "chat" and folder.setting("llm.chat.fallback_model"):
            text += (
                f", then {folder.setting('llm.chat.fallback_model')} when the best passage "
                f"is under {folder.setting('llm.chat.fallback_below'):g}"
            )
        if role == "extract":
            used = [
                k
                for k, key in (
                    ("entities", "entities.extractor"),
                    ("descriptions", "entities.describer"),
                )
                if folder.setting(key) == "llm"
            ]
            text += f" ({', '.join(used)})" if used else " (unused: entities.extractor is local)"
        parts.append(text)
    return "; ".join(parts)


class ChatClient:
    """`chat(messages)` → text; `stream=True` yields tokens to `on_token` as they arrive."""

    def __init__(self, cfg: LLMConfig) -> None:
        self.cfg = cfg

    def _url(self) -> str:
        base = self.cfg.base_url
        return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.cfg.api_key:
            h["Authorization"] = f"Bearer {self.cfg.api_key}"
        return h

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        json_mode: bool = False,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stream: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        import httpx

        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": messages,
            "temperature": temperature,
        }
        if max_tokens:
            body["max_tokens"] = max_tokens
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        if stream:
            body["stream"] = True
        last: Exception | None = None
        for attempt in range(self.cfg.retries + 1):
            if attempt:
                time.sleep(min(4.0, 0.5 * 2 ** (attempt - 1)))
            try:
                with httpx.Client(timeout=self.cfg.timeout) as client:
                    if stream:
                        return self._stream(client, body, on_token)
                    r = client.post(self._url(), json=body, headers=self._headers())
                    if r.status_code >= 500 or r.status_code == 429:
                        last = LLMError(f"LLM endpoint answered HTTP {r.status_code}")
                        continue
                    if r.status_code >= 400:
                        raise LLMError(
                            f"LLM endpoint answered HTTP {r.status_code}: {r.text[:200]}",
                            "check llm.model and the API key",
                        )
                    return _content(r.json())
            except httpx.TimeoutException as e:
                last = LLMError(
                    f"LLM endpoint timed out after {self.cfg.timeout:.0f}s",
                    "raise llm.timeout or check the server",
                )
                last.__cause__ = e
            except httpx.HTTPError as e:
                last = LLMError(
                    f"cannot reach the LLM endpoint {self.cfg.base_url}: {type(e).__name__}",
                    "is the server running?",
                )
                last.__cause__ = e
            except ValueError as e:
                last = LLMError("the LLM endpoint answered with invalid JSON")
                last.__cause__ = e
        assert last is not None
        raise last

    def _stream(
        self, client: Any, body: dict[str, Any], on_token: Callable[[str], None] | None
    ) -> str:
        parts: list[str] = []
        with client.stream("POST", self._url(), json=body, headers=self._headers()) as r:
            if r.status_code >= 400:
                raise LLMError(f"LLM endpoint answered HTTP {r.status_code}")
            for token in _sse_tokens(r.iter_lines()):
                parts.append(token)
                if on_token:
                    on_token(token)
        return "".join(parts)

    def chat_json(
        self, messages: list[dict[str, str]], validate: Callable[[Any], Any], attempts: int = 2
    ) -> Any:
        """Ask for JSON and validate it; a reply that fails validation is retried once."""
        err: Exception | None = None
        for _ in range(attempts):
            text = self.chat(messages, json_mode=True)
            try:
                return validate(json.loads(_strip_fences(text)))
            except (ValueError, TypeError, KeyError) as e:
                err = e
        raise LLMError(
            f"the LLM returned invalid JSON: {err}", "try another model, or run without an LLM"
        )


def _content(data: Any) -> str:
    try:
        return str(data["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError) as e:
        raise LLMError("the LLM reply has no choices[0].message.content") from e


def _sse_tokens(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            delta = json.loads(payload)["choices"][0].get("delta", {})
        except (ValueError, KeyError, IndexError):
            continue
        if delta.get("content"):
            yield delta["content"]


def _strip_fences(text: str) -> str:
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        t = t.rsplit("```", 1)[0]
    return t
