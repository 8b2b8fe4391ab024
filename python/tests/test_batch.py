"""`diamond.convert_many`: a directory with good, erroneous and corrupt
models converts on worker threads; each model's result is yielded, and one
failure does not stop the batch."""

import shutil

import onnx

import diamond
from conftest import fixture


def make_tree(root):
    (root / "nested").mkdir(parents=True)
    shutil.copy(fixture("check/exported_transformer.onnx"), root / "transformer.onnx")
    shutil.copy(fixture("check/exported_cnn.onnx"), root / "nested" / "cnn.onnx")
    shutil.copy(fixture("check/broadcast_conflict.onnx"), root / "conflict.onnx")
    (root / "corrupt.onnx").write_bytes(fixture("malformed/truncated_03.onnx").read_bytes())
    (root / "notes.txt").write_text("not a model")


def test_a_directory_with_a_corrupt_file_converts_the_rest(tmp_path):
    source, out = tmp_path / "in", tmp_path / "out"
    make_tree(source)
    results = list(diamond.convert_many([source], out, jobs=2))
    by_name = {r.input.name: r for r in results}
    assert set(by_name) == {"transformer.onnx", "cnn.onnx", "conflict.onnx", "corrupt.onnx"}
    assert by_name["transformer.onnx"].ok and by_name["cnn.onnx"].ok
    assert by_name["cnn.onnx"].output == out / "nested" / "cnn.onnx"
    for name in ("transformer.onnx", "cnn.onnx"):
        written = onnx.load(str(by_name[name].output))
        assert written.graph.value_info, "inferred types were added"
        assert by_name[name].message is None and by_name[name].report is None
    conflict = by_name["conflict.onnx"]
    assert conflict.status == "errors" and "broadcast-conflict" in conflict.message
    assert isinstance(conflict.report, diamond.Report) and not conflict.report.ok
    corrupt = by_name["corrupt.onnx"]
    assert corrupt.status == "unreadable" and str(corrupt.input) in corrupt.message
    assert not corrupt.output.exists() and not conflict.output.exists()


def test_files_land_by_name_and_results_stream(tmp_path):
    files = [fixture("check/exported_transformer.onnx"), fixture("check/dynamic_specialized.onnx")]
    stream = diamond.convert_many(files, tmp_path, jobs=1)
    first = next(stream)
    assert first.ok and first.output.parent == tmp_path
    rest = list(stream)
    assert len(rest) == 1 and rest[0].ok
    assert {r.output.name for r in [first, *rest]} == {f.name for f in files}


def test_the_batch_writes_what_convert_returns(tmp_path):
    model = fixture("check/exported_transformer.onnx")
    [result] = diamond.convert_many([model], tmp_path)
    assert result.output.read_bytes() == diamond.convert(model)
    [plain] = diamond.convert_many([model], tmp_path / "plain", value_info=False)
    assert plain.output.read_bytes() == diamond.convert(model, value_info=False)
