"""The public API is typed and documented: every op of contextrag.ops, ContextRAG's methods, Config,
Hit, Answer and the integrations' helpers have annotated parameters and results, and the ops' docstrings
say what each argument and the result are (the API reference is generated from them). mypy checks the
annotations themselves (.ci/typecheck.sh); this checks that none is missing, without mypy."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

import contextrag
from contextrag import ops
from contextrag.integrations import hit_metadata, open_rag, score_of
from contextrag.query import Answer, Hit

_NOT_FUNCTIONS = {"LloydOptions", "KMeansResult", "RQResult", "FCMResult", "SpreadIncidence"}
OPS = sorted(set(ops.__all__) - _NOT_FUNCTIONS)


def _unannotated(fn) -> list[str]:
    sig = inspect.signature(fn)
    missing = [p.name for p in sig.parameters.values()
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
        missing.append("return")
    return missing


@pytest.mark.parametrize("name", OPS)
def test_every_op_is_annotated(name):
    assert _unannotated(getattr(ops, name)) == [], name


@pytest.mark.parametrize("name", [n for n in OPS if n not in ("backends", "availability", "native", "op_tables")])
def test_every_op_documents_its_arguments_and_result(name):
    fn = getattr(ops, name)
    doc = inspect.getdoc(fn) or ""
    assert "Args:" in doc and "Returns:" in doc, name
    args = doc.split("Args:", 1)[1].split("Returns:", 1)[0]
    for p in inspect.signature(fn).parameters:
        assert f"{p}:" in args, f"{name}: argument {p} is not documented"


@pytest.mark.parametrize("name", [n for n, v in vars(contextrag.ContextRAG).items()
                                  if not n.startswith("_") and callable(getattr(v, "__func__", v))])
def test_contextrag_methods_are_annotated(name):
    fn = getattr(contextrag.ContextRAG, name)
    assert _unannotated(fn) == [], name
    assert inspect.getdoc(fn), name


@pytest.mark.parametrize("cls", [contextrag.Config, Hit, Answer])
def test_result_and_config_types_are_typed_dataclasses(cls):
    assert dataclasses.is_dataclass(cls) and inspect.getdoc(cls)
    for f in dataclasses.fields(cls):
        assert f.type not in ("dict", "list", "tuple", "object"), f"{cls.__name__}.{f.name}: {f.type}"


@pytest.mark.parametrize("fn", [open_rag, hit_metadata, score_of])
def test_integration_helpers_are_annotated(fn):
    assert _unannotated(fn) == []


def test_op_results_keep_the_input_kind_in_their_type():
    import typing
    hints = typing.get_type_hints(ops.KMeansResult)
    assert hints["centroids"] is hints["labels"] and isinstance(hints["centroids"], typing.TypeVar)
