"""Chat clients for the LLM baselines: OpenAI, Anthropic, Gemini and any OpenAI-compatible endpoint.

Each provider is called through its official SDK (the ``llm`` extra: ``openai``, ``anthropic``,
``google-genai``), imported only when used. API keys come only from environment variables
(:data:`KEY_ENV`) and are never written anywhere: they are not part of a cache key, a cache record, a
result or a log line. Everything a client hands back (error messages, cached replies) is scrubbed of the key
in every form a server or a library might echo it (:func:`redact`).

Retries: the SDKs' own retries are switched off and every request goes through one policy (tenacity):
up to ``max_retries`` retries on rate limits (429), timeouts, dropped connections and server errors
(408, 409, 5xx), waiting ``backoff * 2**k`` seconds with jitter (capped at 120 s), or longer when the
server sends ``Retry-After``. Other errors (bad key, unknown model, bad request) fail at once.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from orbitlaw.validate import FieldError, at_least, positive

PROVIDERS = ("openai", "anthropic", "gemini", "openai-compatible")
KEY_ENV = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai-compatible": ("ORBITLAW_LLM_API_KEY", "OPENAI_API_KEY"),
}
OPENAI_HOSTS = ("api.openai.com",)
"""Where ``openai-compatible`` may send ``OPENAI_API_KEY``: OpenAI's own endpoint. Any other ``--base-url`` takes
its key from ``ORBITLAW_LLM_API_KEY`` only, so an OpenAI key never reaches a host it was not made for."""
ANTHROPIC_DEFAULT_MAX_TOKENS = 32000
"""Anthropic requires an output budget; 450 numbers plus reasoning fit comfortably."""
_MAX_WAIT_S = 120.0


@dataclass(frozen=True)
class Settings:
    """Generation settings that change the answer (and so are part of the cache key).

    temperature: sampling temperature, None for the provider's default (reasoning models such as o3
    accept only the default); max_tokens: output budget in tokens, None for the default
    (Anthropic: 32000); reasoning_effort: OpenAI reasoning effort (low/medium/high), None for default.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Completion:
    """One answered request: the raw ``text``, the provider's finish reason, token ``usage``, the model
    name the server reports, and the number of ``attempts`` it took."""

    text: str
    finish_reason: str | None = None
    usage: dict = field(default_factory=dict)
    served_model: str | None = None
    attempts: int = 1


def api_key(provider: str, base_url: str | None = None) -> str:
    """The provider's key from its environment variable(s); ValueError (one line) if unset. ``openai-compatible``
    reads ``OPENAI_API_KEY`` only for a ``base_url`` on :data:`OPENAI_HOSTS`."""
    from urllib.parse import urlsplit

    check_provider(provider)
    names = KEY_ENV[provider]
    host = urlsplit(base_url or "").hostname or ""
    if provider == "openai-compatible" and host not in OPENAI_HOSTS:
        names = tuple(n for n in names if n != "OPENAI_API_KEY")
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    held = (f" (OPENAI_API_KEY is sent only to {', '.join(OPENAI_HOSTS)}, not to {host or base_url}; to send it "
            "there, set ORBITLAW_LLM_API_KEY to it)" if names != KEY_ENV[provider] and os.environ.get(
                "OPENAI_API_KEY", "").strip() else "")
    raise ValueError(f"no API key for {provider}: set {' or '.join(names)} in the environment{held}")


def check_provider(provider: str) -> None:
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")


MIN_SECRET_PART = 4
"""The shortest run of a key's first or last characters that :func:`redact` removes."""
FRAGMENT = 6
"""The shortest piece of the key from anywhere in it (its middle included) that :func:`redact` removes; in an
encoding, the characters that encode that many of the key's (8 of base64, 12 of hex)."""


def _secret_forms(secret: str) -> set[str]:
    """The key as written, and as JSON, a URL, Python's repr and HTML escape it, and reversed."""
    from html import escape
    from urllib.parse import quote, quote_plus

    return {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret), repr(secret)[1:-1],
            secret.encode("unicode_escape").decode("ascii"), escape(secret), secret[::-1]}


def _encoded_forms(secret: str) -> dict[str, int]:
    """The key's common encodings, each with the window (characters) that encodes :data:`FRAGMENT` of the key's."""
    import base64

    raw = secret.encode()
    b64 = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    b64 |= {f.rstrip("=") for f in b64}
    return {**{f: FRAGMENT * 4 // 3 for f in b64}, raw.hex(): 2 * FRAGMENT, raw.hex().upper(): 2 * FRAGMENT}


@functools.lru_cache(maxsize=8)  # redact_all calls redact on every string of a record
def _fragments(secret: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every window of :data:`FRAGMENT` characters of every written form of the key, and every window of its
    encoded length of every encoding (:func:`_encoded_forms`)."""
    def windows(forms: dict[str, int]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f[i:i + n] for f, n in forms.items() if len(f) >= n for i in range(len(f) - n + 1)))
    return windows({form: FRAGMENT for form in _secret_forms(secret)}), windows(_encoded_forms(secret))


def redact(text: str, secret: str | None) -> str:
    """``text`` with the key ``secret`` replaced by ``***`` wherever any part of it shows: the key in each of
    its escaped forms (:func:`_secret_forms`), and every run of :data:`MIN_SECRET_PART` or more characters
    that begins or ends one of those forms (error messages print a key's prefix or suffix, ``sk-abc1...wxyz``).
    A key shorter than that is replaced only whole. Any :data:`FRAGMENT` characters of the key, from anywhere in
    it, in any of those forms, reversed, or in base64 or hex (:func:`_fragments`), are replaced too, so no piece
    of the key longer than five characters survives in any form, except a run of the key's own digits alone
    (which a reply's numbers are made of; its encodings are scrubbed wherever they show)."""
    if not secret or not text:
        return text
    written, encoded = _fragments(secret)
    spans = [(i, i + len(part)) for part in written for i in _find_all(text, part)]
    for form in _secret_forms(secret):
        if len(form) < MIN_SECRET_PART:
            spans += [(i, i + len(form)) for i in _find_all(text, form)]
            continue
        for i in _find_all(text, form[:MIN_SECRET_PART]):  # a prefix: as far as it goes on matching the key
            n = MIN_SECRET_PART
            while n < len(form) and i + n < len(text) and text[i + n] == form[n]:
                n += 1
            spans.append((i, i + n))
        for i in _find_all(text, form[-MIN_SECRET_PART:]):  # a suffix: as far back as it matches
            end, n = i + MIN_SECRET_PART, MIN_SECRET_PART
            while n < len(form) and end - n - 1 >= 0 and text[end - n - 1] == form[-n - 1]:
                n += 1
            spans.append((end - n, end))
    # a run of digits alone is left: a reply's numbers are made of them (a key's "123456" would turn an answer's
    # 1.123456e-3 into 1.***e-3), and six digits say little of a key
    spans = [(a, b) for a, b in spans if not text[a:b].isdigit()]
    spans += [(i, i + len(part)) for part in encoded for i in _find_all(text, part)]  # 12 hex digits are the key's
    out, at = [], 0
    for start, end in sorted(spans):
        if start >= at:  # a new span; one that overlaps the last only extends it
            out.append(text[at:start] + "***")
        at = max(at, end)
    return "".join(out) + text[at:]


def _find_all(text: str, part: str) -> list[int]:
    found, i = [], text.find(part)
    while i >= 0:
        found.append(i)
        i = text.find(part, i + 1)
    return found


def redact_all(obj, secret: str | None):
    """``obj`` (JSON-like: dicts, lists, strings) with :func:`redact` applied to every string, keys included."""
    if isinstance(obj, str):
        return redact(obj, secret)
    if isinstance(obj, dict):
        return {redact_all(k, secret): redact_all(v, secret) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_all(v, secret) for v in obj]
    return obj


def _jsonable(obj) -> dict:
    if obj is None:
        return {}
    try:
        return json.loads(obj.model_dump_json(exclude_none=True))
    except (AttributeError, TypeError, ValueError):
        return {}


def _status(exc: BaseException) -> int | None:
    for name in ("status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _transport_errors() -> tuple[type, ...]:
    """Timeout and connection exception classes of the SDKs and HTTP stacks already imported."""
    found: list[type] = [TimeoutError, ConnectionError]
    for module, name in (("openai", "APIConnectionError"), ("anthropic", "APIConnectionError"),
                         ("httpx", "TransportError"), ("httpx2", "TransportError")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def is_retryable(exc: BaseException) -> bool:
    """True for rate limits, timeouts, connection failures and server errors."""
    status = _status(exc)
    if status is not None:
        return status in (408, 409, 425, 429) or status >= 500
    return isinstance(exc, _transport_errors())


def retry_after_s(exc: BaseException) -> float:
    """Seconds the server asked us to wait (``Retry-After`` / ``retry-after-ms``), 0 if none."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return 0.0
    try:
        if headers.get("retry-after-ms") is not None:
            return float(headers["retry-after-ms"]) / 1000.0
        if headers.get("retry-after") is not None:
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        pass
    return 0.0


class ChatClient:
    """One provider and model; :meth:`complete` sends one user message with retries.

    base_url: endpoint override (required for ``openai-compatible``; every SDK accepts one);
    timeout: seconds per request; max_retries: retries after the first attempt; backoff: first wait in s.
    """

    def __init__(self, provider: str, model: str, settings: Settings | None = None, base_url: str | None = None,
                 timeout: float = 900.0, max_retries: int = 5, backoff: float = 1.0):
        check_provider(provider)
        if provider == "openai-compatible" and not base_url:
            raise FieldError("base_url", "is required for the openai-compatible provider")
        if not model:
            raise FieldError("model", "must name a model")
        limits = SimpleNamespace(timeout=timeout, max_retries=max_retries, backoff=backoff)
        positive(limits, "timeout")
        at_least(limits, 0, "max_retries", "backoff")
        self.provider, self.model, self.base_url = provider, model, base_url
        self.settings = settings or Settings()
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
        self._key = api_key(provider, base_url)
        self._client = self._make_client()

    # ------------------------------------------------------------------------------------------------
    def _make_client(self):
        try:
            if self.provider in ("openai", "openai-compatible"):
                import openai

                return openai.OpenAI(api_key=self._key, base_url=self.base_url, timeout=self.timeout,
                                     max_retries=0)
            if self.provider == "anthropic":
                import anthropic

                return anthropic.Anthropic(api_key=self._key, base_url=self.base_url, timeout=self.timeout,
                                           max_retries=0)
            from google import genai
            from google.genai import types

            options = types.HttpOptions(timeout=int(self.timeout * 1000), base_url=self.base_url,
                                        retry_options=types.HttpRetryOptions(attempts=1))
            return genai.Client(api_key=self._key, http_options=options)
        except ImportError as exc:
            raise ValueError(f"the {self.provider} SDK is not installed ({exc.name}); "
                             "pip install 'orbitlaw[llm]'") from None

    def _once(self, prompt: str) -> Completion:
        s = self.settings
        messages = [{"role": "user", "content": prompt}]
        if self.provider in ("openai", "openai-compatible"):
            extra = {}
            if s.temperature is not None:
                extra["temperature"] = s.temperature
            if s.max_tokens is not None:
                extra["max_completion_tokens"] = s.max_tokens
            if s.reasoning_effort is not None:
                extra["reasoning_effort"] = s.reasoning_effort
            r = self._client.chat.completions.create(model=self.model, messages=messages, **extra)
            choice = r.choices[0] if r.choices else None
            text = (choice.message.content if choice else None) or ""
            return Completion(text, getattr(choice, "finish_reason", None), _jsonable(r.usage), r.model)
        if self.provider == "anthropic":
            # temperature through extra_body: recent SDKs no longer list it as an argument
            extra = {} if s.temperature is None else {"extra_body": {"temperature": s.temperature}}
            r = self._client.messages.create(model=self.model, messages=messages,
                                             max_tokens=s.max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS, **extra)
            text = "".join(getattr(b, "text", "") for b in r.content if getattr(b, "type", "") == "text")
            return Completion(text, r.stop_reason, _jsonable(r.usage), r.model)
        from google.genai import types

        config = types.GenerateContentConfig(temperature=s.temperature, max_output_tokens=s.max_tokens)
        r = self._client.models.generate_content(model=self.model, contents=prompt, config=config)
        candidates = r.candidates or []
        finish = candidates[0].finish_reason if candidates else None
        text = "".join(p.text or "" for p in (candidates[0].content.parts or [])) if candidates and \
            candidates[0].content else ""
        return Completion(text, str(getattr(finish, "value", finish)) if finish else None,
                          _jsonable(r.usage_metadata), getattr(r, "model_version", None))

    def _wait(self, state) -> float:
        import random

        exc = state.outcome.exception() if state.outcome else None
        k = state.attempt_number - 1
        base = min(_MAX_WAIT_S, self.backoff * 2**k) if self.backoff else 0.0
        return min(_MAX_WAIT_S, max(base * (0.5 + random.random() / 2), retry_after_s(exc) if exc else 0.0))

    def scrub(self, record):
        """``record`` (JSON-like) with this client's key removed in every form (:func:`redact_all`): what a
        reply may carry back, before it is cached or written."""
        return redact_all(record, self._key)

    def complete(self, prompt: str) -> Completion:
        """Send ``prompt`` as one user message; retries as in the module docstring. Raises RuntimeError
        (one line, key redacted) when the request fails for good."""
        import tenacity

        retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(self.max_retries + 1), wait=self._wait,
                                     retry=tenacity.retry_if_exception(is_retryable), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    completion = self._once(prompt)
                    completion.attempts = attempt.retry_state.attempt_number
                    return completion
        except Exception as exc:  # noqa: BLE001 - every SDK failure becomes one recorded line
            n = retrying.statistics.get("attempt_number", 1)
            message = redact(" ".join(str(exc).split()), self._key)[:300]  # redact before cutting: no key half
            raise RuntimeError(redact(f"{self.provider} {self.model}: {type(exc).__name__}: {message} "
                                      f"(after {n} attempt{'s' if n != 1 else ''})", self._key)) from None
