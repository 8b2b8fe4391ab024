"""`diamond.convert` and `diamond.optimize`: the model comes back as it was
given (a `ModelProto` for a `ModelProto`, else bytes), or is written to a
file."""

import onnx
import pytest

import diamond
from conftest import fixture


def inferred_names(model: onnx.ModelProto) -> set:
    return {v.name for v in model.graph.value_info}


def test_convert_returns_the_kind_it_was_given(transformer):
    proto = onnx.load(str(transformer))
    assert not inferred_names(proto)
    converted = diamond.convert(proto)
    assert isinstance(converted, onnx.ModelProto)
    assert converted is not proto
    from_path = diamond.convert(transformer)
    from_bytes = diamond.convert(transformer.read_bytes())
    assert isinstance(from_path, bytes) and isinstance(from_bytes, bytes)
    assert from_path == from_bytes == converted.SerializeToString()


def test_convert_adds_the_inferred_types_the_report_lists(transformer):
    converted = diamond.convert(onnx.load(str(transformer)))
    report = diamond.check(transformer)
    typed = inferred_names(converted)
    assert typed, "value_info is filled"
    assert typed <= set(report.values)
    onnx.checker.check_model(converted)
    for info in converted.graph.value_info:
        dims = info.type.tensor_type.shape.dim
        want = report.values[info.name].shape
        assert len(dims) == len(want), info.name
        for dim, expected in zip(dims, want):
            if isinstance(expected, int):
                assert dim.dim_value == expected, info.name


def test_convert_without_value_info_re_exports_only(transformer):
    plain = onnx.load_from_string(diamond.convert(transformer, value_info=False))
    assert not inferred_names(plain)
    assert len(plain.graph.node) == len(onnx.load(str(transformer)).graph.node)


def test_convert_writes_to_output(tmp_path, transformer):
    target = tmp_path / "deep" / "out.onnx"
    assert diamond.convert(transformer, output=target) is None
    assert target.read_bytes() == diamond.convert(transformer)


def test_optimize_shrinks_and_verifies():
    path = fixture("optimize/fold_shapes.onnx")
    before = onnx.load(str(path))
    after = diamond.optimize(before)
    assert isinstance(after, onnx.ModelProto)
    assert len(after.graph.node) < len(before.graph.node)
    assert [o.name for o in after.graph.output] == [o.name for o in before.graph.output]
    onnx.checker.check_model(after)
    unverified = diamond.optimize(path, verify=False)
    assert isinstance(unverified, bytes)
    assert onnx.load_from_string(unverified).graph.node == after.graph.node


def test_optimize_runs_only_the_passes_given():
    path = fixture("optimize/dead_code.onnx")
    nodes = len(onnx.load(str(path)).graph.node)
    untouched = onnx.load_from_string(diamond.optimize(path, passes=[]))
    assert len(untouched.graph.node) == nodes
    cleaned = onnx.load_from_string(diamond.optimize(path, passes=["dead-code"]))
    assert len(cleaned.graph.node) < nodes
    assert "dead-code" in diamond.PASSES


def test_optimize_writes_to_output(tmp_path):
    path = fixture("optimize/cse.onnx")
    target = tmp_path / "cse.onnx"
    assert diamond.optimize(path, output=target) is None
    assert onnx.load(str(target)).graph.node == onnx.load_from_string(diamond.optimize(path)).graph.node


@pytest.mark.parametrize("name", ["check/exported_cnn.onnx", "check/exported_transformer.onnx"])
def test_optimized_models_check_clean(name):
    optimized = diamond.optimize(fixture(name))
    assert diamond.check(optimized).ok
