"""`diamond.run`: NumPy arrays in, NumPy arrays out, compared with the
outputs stored beside the ONNX node-suite cases and the TorchScript
fixtures."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import diamond
from conftest import FIXTURES, fixture

NODE_SUITE = FIXTURES / "onnx-node"
# The element types NumPy and onnx's numpy_helper share (onnx hands the
# others out as ml_dtypes arrays, which diamond returns widened).
PLAIN = {
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
    onnx.TensorProto.BOOL, onnx.TensorProto.STRING,
}  # fmt: skip


# As runtime/tests/node_suite.rs holds them: NumPy's random draws no runtime
# reproduces (only the shape and type are compared), and float32 round-off
# the reference's inverse FFT leaves where the exact value is 0.
RANDOM_CASES = ("test_bernoulli", "test_training_dropout")
FLOAT32_NOISE = ("test_dft_inverse", "test_dft_inverse_opset19")


def passing_cases():
    """The node-suite cases `diamond run` passes (fixtures/onnx-node-run-status.txt)."""
    status = (FIXTURES / "onnx-node-run-status.txt").read_text().splitlines()
    return [line.split()[0] for line in status if line.endswith(" pass")]


def plain_tensors(values) -> bool:
    return all(v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in PLAIN for v in values)


def case_data(case: Path):
    """(model path, inputs by name, expected outputs by name), or None
    when the case feeds or returns something other than plain tensors."""
    model = onnx.load(str(case / "model.onnx"), load_external_data=False)
    initialized = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initialized]
    if not plain_tensors(inputs) or not plain_tensors(model.graph.output):
        return None
    data = case / "test_data_set_0"
    fed = {}
    for i, declared in enumerate(inputs):
        path = data / f"input_{i}.pb"
        if path.exists():
            fed[declared.name] = numpy_helper.to_array(onnx.load_tensor(str(path)))
    expected = {}
    for i, declared in enumerate(model.graph.output):
        expected[declared.name] = numpy_helper.to_array(onnx.load_tensor(str(data / f"output_{i}.pb")))
    return case / "model.onnx", fed, expected


def assert_same(got: np.ndarray, want: np.ndarray, where: str, atol: float = 1e-7):
    assert got.shape == want.shape, f"{where}: shape {got.shape}, stored {want.shape}"
    if want.dtype == object:
        assert got.dtype == object, where
        assert [bytes(x) if not isinstance(x, bytes) else x for x in got.ravel()] == [
            x.encode() if isinstance(x, str) else x for x in want.ravel()
        ], where
        return
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, stored {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        # onnx's backend tolerance; float16 results also get its rounding step at 1 (2**-10).
        atol = max(atol, 2.0**-10) if want.dtype == np.float16 else atol
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=atol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def test_the_node_suite_round_trips_through_numpy():
    ran = 0
    dtypes = set()
    problems = []
    for name in passing_cases():
        data = case_data(NODE_SUITE / name)
        if data is None:
            continue
        model, fed, expected = data
        outputs = diamond.run(model, fed)
        assert list(outputs) == list(expected), name
        for output, want in expected.items():
            got = outputs[output]
            assert isinstance(got, np.ndarray), name
            if name.startswith(RANDOM_CASES):
                assert (got.shape, got.dtype) == (want.shape, want.dtype), name
                continue
            try:
                atol = 1e-6 if name in FLOAT32_NOISE else 1e-7
                assert_same(got, want, f"{name} output '{output}'", atol)
            except AssertionError as error:
                problems.append(str(error))
            dtypes.add(got.dtype.str if got.dtype != object else "object")
        ran += 1
    assert not problems, "\n".join(problems)
    assert ran >= 1655, f"only {ran} node cases ran"
    assert {"<f4", "<f8", "<f2", "<i8", "|b1", "object", "|u1"} <= dtypes


@pytest.mark.parametrize("name", ["scripted_control", "resnet_tiny", "gpt_tiny"])
def test_torchscript_fixtures_match_their_stored_outputs(name):
    model = fixture(f"torch/{name}.pt")
    x = np.load(fixture(f"torch/{name}.input.npy"))
    # Scripted (not traced) code states no shapes: the caller gives them, as with --input-shape.
    shapes = {"x": x.shape} if name == "scripted_control" else None
    [input_name] = diamond.check(model, input_shapes=shapes).inputs
    outputs = diamond.run(model, {input_name: x}, input_shapes=shapes)
    [got] = outputs.values()
    want = np.load(fixture(f"torch/{name}.output.npy"))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def test_outputs_are_writable_arrays_and_inputs_may_be_strided():
    case = NODE_SUITE / "test_transpose_default"
    model, fed, expected = case_data(case)
    [(name, x)] = fed.items()
    strided = np.asfortranarray(x)
    assert not strided.flags.c_contiguous
    every_other = np.repeat(x, 2, axis=-1)[..., ::2]
    assert not every_other.flags.c_contiguous and np.array_equal(every_other, x)
    for given in (x, strided, every_other, x.astype(x.dtype.newbyteorder(">"))):
        [(out_name, got)] = diamond.run(model, {name: given}).items()
        assert_same(got, expected[out_name], "transpose")
        assert got.flags.writeable and got.flags.c_contiguous
        got[...] = 0


def test_a_model_proto_and_bytes_run_too():
    case = NODE_SUITE / "test_add_bcast"
    model, fed, expected = case_data(case)
    for given in (onnx.load(str(model)), model.read_bytes()):
        outputs = diamond.run(given, fed)
        for name, want in expected.items():
            assert_same(outputs[name], want, "add_bcast")


def test_inputs_that_do_not_fit_are_value_errors():
    model, fed, _ = case_data(NODE_SUITE / "test_add_bcast")
    with pytest.raises(ValueError, match="input"):
        diamond.run(model, {})
    wrong_type = {name: value.astype(np.float64) for name, value in fed.items()}
    with pytest.raises(ValueError):
        diamond.run(model, wrong_type)
    wrong_rank = {name: value.reshape(-1) for name, value in fed.items()}
    with pytest.raises(ValueError):
        diamond.run(model, wrong_rank)
    with pytest.raises(ValueError, match="no ONNX element type"):
        diamond.run(model, {name: value.astype(np.complex64) for name, value in fed.items()})


def test_sequence_outputs_come_back_as_lists():
    case = NODE_SUITE / "test_split_to_sequence_1"
    model = onnx.load(str(case / "model.onnx"))
    data = case / "test_data_set_0"
    fed = {
        i.name: numpy_helper.to_array(onnx.load_tensor(str(data / f"input_{n}.pb")))
        for n, i in enumerate(model.graph.input)
    }
    sequence = onnx.SequenceProto()
    sequence.ParseFromString((data / "output_0.pb").read_bytes())
    want = numpy_helper.to_list(sequence)
    [got] = diamond.run(case / "model.onnx", fed).values()
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w, "split_to_sequence")
