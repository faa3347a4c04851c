"""The base of every nested section of the portable schema."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecSection(BaseModel):
    """Base for nested spec sections: immutable; unknown keys are kept (``model_extra``) for lint
    to report and compile to carry, because teams extend the schema with fields of their own."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)
