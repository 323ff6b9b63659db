"""The OpenAI chat-completions wire format the policy endpoint speaks: requests in, completions and errors out.

Only what an agent written against the OpenAI SDK sends is modelled; unknown fields are accepted and ignored,
as OpenAI-compatible servers do, so a client that sets ``parallel_tool_calls`` or ``metadata`` still works.
Errors carry OpenAI's body (``{"error": {"message", "type", "param", "code"}}``) with its HTTP status, so the
SDK raises the exception it raises against OpenAI (``BadRequestError``, ``NotFoundError``, ...).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ToolCallFunction(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    arguments: str = Field("{}", description="The arguments as a JSON text, as OpenAI sends them.")


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = ""
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(BaseModel):
    """One message of the conversation a client sends (content may be a string or a list of text parts)."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    reasoning_content: str | None = Field(None, description="An assistant turn's thinking, as the endpoint returned it.")
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        """The content as one text: list content keeps its text parts in order."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(part.get("text", "")) for part in self.content if part.get("type", "text") == "text")


class FunctionSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpec(BaseModel):
    """One entry of ``tools``: a function the model may call."""

    model_config = ConfigDict(extra="allow")

    type: Literal["function"] = "function"
    function: FunctionSpec


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``: the fields the endpoint reads. ``tool_choice`` and ``response_format`` are
    accepted and not enforced: the policy decides whether to call a tool, as it does in training."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int | None = None
    seed: int | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = Field(None, ge=0, le=20)

    def tool_dicts(self) -> list[dict[str, Any]] | None:
        """The tools as the chat template takes them (None when there are none). ``"strict": false``, OpenAI's
        default, is left out: frameworks that spell it out (the OpenAI Agents SDK) then render the same prompt as
        clients that do not, and as the agent was trained with."""
        if not self.tools:
            return None
        dicts = [t.model_dump(exclude_none=True) for t in self.tools]
        for tool in dicts:
            if tool.get("function", {}).get("strict") is False:
                del tool["function"]["strict"]
        return dicts

    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])


class OpenAIError(Exception):
    """An error the endpoint answers with OpenAI's error body and status."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": type, "param": param, "code": code}}


def validation_error(exc: ValidationError) -> OpenAIError:
    """A request that does not validate, as OpenAI reports it: the first problem, its parameter and code."""
    first = exc.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    if first["type"] == "missing":
        return OpenAIError(400, f"Missing required parameter: '{param}'.", param=param,
                           code="missing_required_parameter")
    return OpenAIError(400, f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value")


@dataclass(frozen=True)
class Completion:
    """One sampled turn as the endpoint answers it."""

    message: dict[str, Any]
    finish_reason: str
    usage: dict[str, int]
    logprobs: list[dict[str, Any]] | None


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion_body(id_: str, model: str, answer: Completion) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    return {
        "id": id_, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": answer.message, "finish_reason": answer.finish_reason,
                     "logprobs": {"content": answer.logprobs} if answer.logprobs is not None else None}],
        "usage": answer.usage,
    }


def completion_chunks(id_: str, model: str, answer: Completion, include_usage: bool) -> list[dict[str, Any]]:
    """The same completion as ``chat.completion.chunk`` objects: the role, the thinking, the content, each tool
    call (its id, name and arguments in one delta, as OpenAI's first delta of a call carries id and name; the
    token log-probabilities, when asked for, ride on the first of these), the finish reason, then (``stream_options.include_usage``) a usage chunk with no choices, as OpenAI sends it."""
    created = int(time.time())
    message = answer.message

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict[str, Any]:
        return {"id": id_, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}]}

    deltas: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        deltas.append({"reasoning_content": message["reasoning_content"]})
    if message.get("content"):
        deltas.append({"content": message["content"]})
    deltas += [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(message.get("tool_calls") or [])]
    logprobs = {"content": answer.logprobs} if answer.logprobs is not None else None
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk(delta, logprobs=logprobs if i == 0 else None) for i, delta in enumerate(deltas)]
    chunks.append(chunk({}, answer.finish_reason))
    if include_usage:
        chunks.append({"id": id_, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": answer.usage})
    return chunks
