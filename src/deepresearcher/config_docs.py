"""Generate ``docs/config.md``, the reference of every config field, from the pydantic models.

Each field is documented once, where it is declared (``Field(description=...)``); this module only
renders those descriptions, so the reference can never drift from the code (a test checks it).
"""

from __future__ import annotations

import json
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from deepresearcher.config import Config

HEADER = """# Configuration reference

Generated from the field declarations in `src/deepresearcher/config.py` by
`deepresearcher config docs > docs/config.md`; do not edit by hand.

Every command takes `--config FILE.yaml` and `--set section.key=value` overrides. Unknown keys are
errors. `deepresearcher config show` prints the resolved config.
"""


def _default(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        value = [item.model_dump(mode="json", exclude_none=True) for item in value]
    return f"`{json.dumps(value, default=str)}`"


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside a list-of-models field's type (``list[DataSource] | None`` -> DataSource), else None."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return item if isinstance(item, type) and issubclass(item, BaseModel) else None
    for arg in get_args(annotation):
        found = _item_model(arg)
        if found is not None:
            return found
    return None


def _section(model: type[BaseModel], prefix: str, out: list[str], seen: set[type] | None = None) -> None:
    """One table per section; a list-of-models field's item fields get one table (``key[]``), where first used."""
    seen = set() if seen is None else seen
    rows, children = [], []
    instance = model()
    for name, field in model.model_fields.items():
        value = getattr(instance, name)
        if isinstance(value, BaseModel):
            children.append((f"{prefix}{name}", type(value)))
            continue
        item = _item_model(field.annotation)
        if item is not None and item not in seen:
            seen.add(item)
            children.append((f"{prefix}{name}[]", item))
        description = (field.description or "").replace("\n", " ").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | {_default(value)} | {description} |")
    if rows:
        title = prefix.rstrip(".") or "top level"
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        out += [f"## `{title}`", "", doc, "", "| key | default | meaning |", "|---|---|---|", *rows, ""]
    for child_prefix, child in children:
        _section(child, child_prefix + ".", out, seen)


def config_reference() -> str:
    """The whole reference as Markdown."""
    out = [HEADER]
    _section(Config, "", out)
    return "\n".join(out).rstrip() + "\n"
