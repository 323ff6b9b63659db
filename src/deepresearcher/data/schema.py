"""One task schema for every benchmark, so agents, rewards and reports never see a dataset's quirks."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["Paragraph", "QATask"]


class Paragraph(BaseModel):
    """A passage shipped with a question (HotpotQA's ten paragraphs, MuSiQue's twenty, ...)."""

    model_config = ConfigDict(frozen=True)

    title: str = ""
    text: str
    supporting: bool | None = Field(None, description="True when the dataset marks it as evidence; None if unknown.")


class QATask(BaseModel):
    """A question with its gold answers, normalized from any benchmark's own format."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id: the dataset's own when it has one, else `<source>_<row>`.")
    source: str = Field(description="Canonical benchmark name: nq, tq, hotpotqa, 2wiki, musique, bamboogle, ...")
    question: str = Field(description="The question as the dataset has it (not stripped: the original fed it verbatim).")
    golds: list[str] = Field(description="Gold answer aliases; any of them counts as correct.")
    split: str = ""
    context: list[Paragraph] = Field(default_factory=list, description="Paragraphs shipped with the question.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Dataset extras: type, level, hops, ...")

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question is empty")
        return value

    @field_validator("golds", mode="before")
    @classmethod
    def _golds_not_blank(cls, value: Any) -> list[str]:
        if isinstance(value, (str, int, float)):
            value = [value]
        cleaned = [str(g).strip() for g in value or [] if g is not None and str(g).strip()]
        if not cleaned:
            raise ValueError("no non-empty gold answer")
        return list(dict.fromkeys(cleaned))
