"""Every error deepresearcher raises on purpose, in one tree.

    DeepResearcherError
    ├── ConfigError            bad config file, override or combination; says what to set
    │   └── ChatTemplateError  the policy's tokenizer has no usable chat template
    ├── GenerationError        a policy generator (local model, vLLM, OpenAI server) failed
    ├── DataError              bad input data (corpus line, task file, dataset); says which line
    ├── IndexNotFoundError     a search index is missing or unreadable
    ├── BackendError           a search backend or page source failed
    │   ├── RateLimitedError   upstream answered 429; carries Retry-After when given
    │   ├── BackendUnavailableError  5xx, network failure, or circuit open
    │   └── BadResponseError   upstream answered something we cannot parse
    ├── PageError              a page cannot be fetched or turned into text
    │   ├── UnsafeURLError     scheme or address refused (file://, private, loopback, link-local)
    │   └── UnsupportedContentError  a content type we cannot turn into text (images, archives)
    ├── ReplayMissError        replay mode asked for something never recorded
    ├── RequestRejectedError   a handler service refused a request as invalid (4xx); no server would accept it
    └── MissingDependencyError an optional extra is not installed; names the pip command

Errors caused by the *policy* (bad tool calls) are never raised: they become observations.
The CLI prints any of these as one ``Error: ...`` line; other exceptions are bugs and show a traceback.
"""

from __future__ import annotations


class DeepResearcherError(Exception):
    """Base class of every error raised on purpose by deepresearcher."""


class ConfigError(DeepResearcherError):
    """The configuration is invalid; the message says what to change."""


class ChatTemplateError(ConfigError):
    """The policy's tokenizer has no chat template, or one the agent cannot extend turn by turn."""


class GenerationError(DeepResearcherError):
    """A policy generator failed (server down, bad response); the rollout cannot go on."""


class DataError(DeepResearcherError):
    """Input data is malformed; the message names the file and line."""


class IndexNotFoundError(DeepResearcherError):
    """A search index directory is missing or does not hold an index."""


class BackendError(DeepResearcherError):
    """A search backend or page source failed."""


class RateLimitedError(BackendError):
    """The upstream answered 429 Too Many Requests."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BackendUnavailableError(BackendError):
    """The upstream is down (5xx, network error) or its circuit breaker is open."""


class BadResponseError(BackendError):
    """The upstream answered with something that is not its documented format."""


class PageError(DeepResearcherError):
    """A page cannot be fetched, or its content cannot be turned into text."""


class ReplayMissError(DeepResearcherError):
    """Replay mode was asked for a request that was never recorded."""


class MissingDependencyError(DeepResearcherError):
    """An optional dependency is missing; the message names the command that installs it."""


class UnsafeURLError(PageError):
    """A URL was refused before connecting: a non-http(s) scheme, or an address that is private,
    loopback or link-local (set ``fetch.allow_private`` or ``fetch.allow_hosts`` to permit it)."""


class UnsupportedContentError(PageError):
    """The page's content type cannot be turned into text (only HTML, PDF and plain text can)."""


class RequestRejectedError(DeepResearcherError):
    """A handler service answered 4xx: the request itself is wrong (or the token is), so no other server
    would accept it either. The message carries the server's explanation."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
