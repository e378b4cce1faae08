"""The ConcurrencyExperiment resource as a whole (metadata and spec), read from a document or
from a YAML file as `kubectl apply -f` takes it; SpecError names every broken rule."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cxlab.experiments.fields import (
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    SpecError,
    describe,
    name_rules,
)
from cxlab.experiments.spec import API_VERSION, KIND, ExperimentSpec
from cxlab.inputs import InputError, load_yaml_documents
from cxlab.rules import Rule, check_rules


class Metadata(BaseModel):
    # Kubernetes metadata carries more (labels, uid, ...); only the name matters here.
    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[str, Field(strict=True, max_length=NAME_MAX_LENGTH, pattern=NAME_PATTERN)]
    namespace: str | None = None


class ConcurrencyExperiment(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    api_version: Literal["cxlab.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ConcurrencyExperiment"]
    metadata: Metadata
    spec: ExperimentSpec

    # The CRD's rules on the resource's name (its schema cannot constrain metadata); cxlab
    # checks the name with Metadata's own bounds first.
    rules: ClassVar[tuple[Rule, ...]] = name_rules(NAME_MAX_LENGTH, "trial Pods are named after it")

    @model_validator(mode="after")
    def _rules_hold(self) -> ConcurrencyExperiment:
        check_rules(self)
        return self

    @property
    def name(self) -> str:
        return self.metadata.name


def parse_experiment(document: Any) -> ConcurrencyExperiment:
    """Validate a loaded YAML/JSON document; SpecError lists every broken rule."""
    if not isinstance(document, dict):
        raise SpecError(["document: is not a mapping; expected a ConcurrencyExperiment"])
    if document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
        raise SpecError(
            [
                f"document: is not a ConcurrencyExperiment (apiVersion {API_VERSION}, "
                f"kind {KIND}); got apiVersion {document.get('apiVersion')!r}, "
                f"kind {document.get('kind')!r}"
            ]
        )
    try:
        return ConcurrencyExperiment.model_validate(document)
    except ValidationError as error:
        raise SpecError([line for e in error.errors() for line in describe(e)]) from None


def load_experiments(path: Path) -> list[ConcurrencyExperiment]:
    """Every ConcurrencyExperiment in a YAML file (several documents, as `kubectl apply -f`
    takes them); SpecError names the document and field of each broken rule, or what is
    wrong with the file itself (cxlab.inputs: size, encoding, YAML, nesting, aliases)."""
    try:
        documents = load_yaml_documents(path)
    except InputError as error:
        raise SpecError([str(error)]) from None
    if not documents:
        raise SpecError(["holds no document; expected a ConcurrencyExperiment"])
    experiments, problems = [], []
    for number, document in enumerate(documents, start=1):
        where = f"document {number}: " if len(documents) > 1 else ""
        try:
            experiments.append(parse_experiment(document))
        except SpecError as error:
            problems += [where + problem for problem in error.problems]
    names = [e.name for e in experiments]
    problems += [
        f"metadata.name: {n!r} is used twice" for n in sorted(set(names)) if names.count(n) > 1
    ]
    if problems:
        raise SpecError(problems)
    return experiments
