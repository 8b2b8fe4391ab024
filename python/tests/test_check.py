"""`diamond.check` on paths, bytes and `onnx.ModelProto`: the report's
values, diagnostics, assumptions, JSON and HTML."""

import json

import numpy as np
import onnx
import pytest

import diamond
from conftest import fixture


def test_a_path_bytes_and_a_model_proto_give_the_same_report(transformer):
    by_path = diamond.check(transformer)
    by_str = diamond.check(str(transformer))
    by_bytes = diamond.check(transformer.read_bytes())
    by_proto = diamond.check(onnx.load(str(transformer)))
    assert by_path.model == str(transformer)
    assert by_bytes.model == by_proto.model == "<bytes>"
    for other in (by_str, by_bytes, by_proto):
        assert other.values == by_path.values
        assert other.diagnostics == by_path.diagnostics
        assert other.inputs == by_path.inputs and other.outputs == by_path.outputs


def test_values_carry_dtypes_and_symbolic_shapes(transformer):
    report = diamond.check(transformer)
    assert report.ok
    assert report.inputs, "the exported transformer has inputs"
    first = report.values[report.inputs[0]]
    assert first.kind == "tensor"
    assert first.dtype is not None
    assert isinstance(first.shape, tuple)
    assert all(d is None or isinstance(d, (int, str)) for d in first.shape)
    assert any(isinstance(d, str) for d in first.shape), "the input has a dynamic axis"
    for name in report.outputs:
        assert report.values[name].shape is not None


def test_a_conflict_is_an_error_with_its_location_and_chain():
    report = diamond.check(fixture("check/broadcast_conflict.onnx"))
    assert not report.ok
    [error] = report.errors
    assert error.code == "broadcast-conflict"
    assert error.severity == "error"
    assert (error.op, error.node) == ("Add", "add1")
    assert error.chain, "an error explains itself"
    assert "broadcast" in str(error)
    assert "1 error" in repr(report)


def test_assumptions_are_the_warnings_the_results_depend_on():
    report = diamond.check(fixture("check/dynamic_specialized.onnx"))
    assert report.ok
    assert [d.code for d in report.assumptions] == ["dynamic-axis-specialized"]
    assert report.assumptions[0] in report.warnings
    assert diamond.check(fixture("check/broadcast_conflict.onnx")).assumptions == []


def test_to_json_is_the_documented_document(transformer):
    report = diamond.check(transformer)
    document = json.loads(report.to_json())
    assert document == report.to_dict()
    assert document["model"] == str(transformer)
    assert set(document["values"]) == set(report.values)
    assert len(document["diagnostics"]) == len(report.diagnostics)


def test_to_html_writes_the_page(tmp_path):
    report = diamond.check(fixture("check/broadcast_conflict.onnx"))
    page = tmp_path / "report.html"
    report.to_html(page)
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "broadcast-conflict" in html and "<svg" in html
    with pytest.raises(OSError):
        report.to_html(tmp_path)


def reshape_model() -> onnx.ModelProto:
    """y = Reshape(x, shape): y's shape is known only when `shape` is."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bind_makes_values_computed_from_an_input_exact():
    model = reshape_model()
    free = diamond.check(model)
    assert free.values["y"].shape != (2, 3)
    bound = diamond.check(model, bind={"shape": np.array([2, 3], dtype=np.int64)})
    assert bound.values["y"].shape == (2, 3)
    assert bound.values["y"].dtype == "float32"
    with pytest.raises(ValueError, match="no input 'nonexistent'"):
        diamond.check(model, bind={"nonexistent": np.zeros(3, dtype=np.int64)})


def test_strict_units_reports_widened_unit_axes():
    model = fixture("check/stated_unit.onnx")
    codes = lambda report: {d.code for d in report.diagnostics}  # noqa: E731
    assert "unit-axis-widened" not in codes(diamond.check(model))
    assert "unit-axis-widened" in codes(diamond.check(model, strict_units=True))


def test_torchscript_takes_input_shapes():
    model = fixture("torch/scripted_control.pt")
    with pytest.raises(diamond.ReadError, match="input-shape"):
        diamond.check(model)
    report = diamond.check(model, input_shapes={"x": (2, 6)})
    assert report.values[report.inputs[0]].shape == (2, 6)
