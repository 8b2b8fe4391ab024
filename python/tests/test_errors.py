"""Bad input raises: an unreadable model `ReadError`, a model with errors
`ModelError` carrying the report, a bad argument `ValueError`/`TypeError` —
never a crash of the interpreter."""

import onnx
import pytest

import diamond
from conftest import fixture

CORRUPT = ["malformed/truncated_03.onnx", "malformed/bitflip_05.onnx", "malformed/garbage_tail.onnx"]


@pytest.mark.parametrize("name", CORRUPT)
def test_a_corrupt_file_is_a_read_error(name):
    path = fixture(name)
    for function in (diamond.check, diamond.convert, diamond.optimize):
        with pytest.raises(diamond.ReadError) as error:
            function(path)
        assert str(path) in str(error.value)
    with pytest.raises(diamond.ReadError):
        diamond.run(path, {})


def test_corrupt_bytes_and_missing_files_are_read_errors(tmp_path):
    for bad in (b"", b"\x08\x07garbage that is not protobuf", bytes(range(256))):
        with pytest.raises(diamond.ReadError):
            diamond.check(bad)
    with pytest.raises(diamond.ReadError, match="No such file"):
        diamond.check(tmp_path / "missing.onnx")
    with pytest.raises(diamond.ReadError, match="directory"):
        diamond.check(tmp_path)


def test_a_malformed_graph_is_a_read_error_as_the_command_exits_2():
    with pytest.raises(diamond.ReadError, match="the graph is malformed: the graph has a cycle"):
        diamond.check(fixture("check/cycle.onnx"))
    with pytest.raises(diamond.ReadError, match="malformed"):
        diamond.convert(fixture("check/dangling.onnx"))


def test_a_model_with_errors_is_a_model_error_carrying_the_report():
    path = fixture("check/broadcast_conflict.onnx")
    for function in (diamond.convert, diamond.optimize):
        with pytest.raises(diamond.ModelError) as caught:
            function(path)
        error = caught.value
        assert isinstance(error, diamond.DiamondError)
        assert isinstance(error.report, diamond.Report)
        assert not error.report.ok
        assert [d.code for d in error.report.errors] == ["broadcast-conflict"]
        assert "1 error(s)" in str(error)


def test_the_report_of_a_model_error_is_the_check_report():
    path = fixture("check/broadcast_conflict.onnx")
    with pytest.raises(diamond.ModelError) as caught:
        diamond.convert(path)
    assert caught.value.report.errors == diamond.check(path).errors


def test_bad_arguments_are_type_and_value_errors(transformer):
    with pytest.raises(TypeError, match="path, bytes or an onnx.ModelProto"):
        diamond.check(42)
    with pytest.raises(ValueError, match="unknown pass 'no-such-pass'"):
        diamond.optimize(transformer, passes=["no-such-pass"])
    with pytest.raises(ValueError, match="input_shapes"):
        diamond.check(fixture("torch/scripted_control.pt"), input_shapes={"x": ("2+", 6)})
    with pytest.raises(ValueError):
        list(diamond.convert_many([transformer], "/tmp", jobs=0))


def test_a_model_proto_that_is_not_a_model_is_a_read_error():
    graph_only = onnx.ModelProto()
    with pytest.raises(diamond.ReadError):
        diamond.check(graph_only)
