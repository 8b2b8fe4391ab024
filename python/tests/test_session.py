"""`diamond.Session`: prepared once, run many times on the simd backend with
onnxruntime's call shape, shapes changing between calls, bad feeds as
`ValueError`s naming the input, fallbacks announced."""

import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import diamond
from conftest import fixture


def feeds(batch: int, seq: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(0, 50, size=(batch, seq), dtype=np.int64),
        "attention_mask": np.ones((batch, seq), dtype=np.int64),
    }


def test_inputs_and_outputs_carry_declared_and_inferred_shapes(transformer):
    session = diamond.Session(transformer)
    assert session.backend == "simd"
    inputs = session.get_inputs()
    assert [(i.name, i.dtype, i.shape) for i in inputs] == [
        ("input_ids", "int64", ("batch", "seq")),
        ("attention_mask", "int64", ("batch", "seq")),
    ]
    assert inputs[0].type == "tensor(int64)"
    outputs = {o.name: o for o in session.get_outputs()}
    # the file declares no output shapes: these are the checker's
    assert outputs["last_hidden_state"].shape == ("batch", "seq", 64)
    assert outputs["logits"].shape == ("batch", 2)
    assert outputs["logits"].type == "tensor(float)"


def test_runs_follow_the_input_shapes_and_match_the_reference(transformer):
    session = diamond.Session(transformer, threads=1)
    for batch, seq in [(1, 4), (3, 9), (1, 4), (2, 16)]:
        fed = feeds(batch, seq, seed=seq)
        hidden, logits = session.run(None, fed)
        assert hidden.shape == (batch, seq, 64) and logits.shape == (batch, 2)
        want = diamond.run(transformer, fed, backend="reference")
        np.testing.assert_allclose(hidden, want["last_hidden_state"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(logits, want["logits"], rtol=1e-4, atol=1e-5)
    (only,) = session.run(["logits"], feeds(2, 5))
    assert only.shape == (2, 2)
    assert list(session.run_dict(feeds(1, 3))) == ["last_hidden_state", "logits"]


def test_bad_feeds_are_value_errors_naming_the_input(transformer):
    session = diamond.Session(transformer)
    fed = feeds(2, 4)
    with pytest.raises(ValueError, match="input 'attention_mask': not fed"):
        session.run(None, {"input_ids": fed["input_ids"]})
    with pytest.raises(ValueError, match="input 'tokens': the model has no input of that name"):
        session.run(None, {**fed, "tokens": fed["input_ids"]})
    with pytest.raises(ValueError, match="output 'probs'"):
        session.run(["probs"], fed)
    # seq is 4 in one input and 5 in the other: the message names the input and the axis
    clash = {"input_ids": fed["input_ids"], "attention_mask": np.ones((2, 5), dtype=np.int64)}
    with pytest.raises(ValueError, match=r"input '(input_ids|attention_mask)' axis 1"):
        session.run(None, clash)
    with pytest.raises(ValueError, match="input_ids"):
        session.run(None, {**fed, "input_ids": fed["input_ids"].astype(np.float32)})
    # the session still runs after refusing
    assert session.run(["logits"], fed)[0].shape == (2, 2)


def test_options_are_checked(transformer):
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        diamond.Session(transformer, backend="tpu")
    with pytest.raises(ValueError, match="threads must be at least 1"):
        diamond.Session(transformer, threads=0)
    with pytest.raises(NotImplementedError):
        diamond.Session(transformer, backend="cuda")
    with pytest.raises(diamond.ReadError):
        diamond.Session(b"not a model")
    reference = diamond.Session(transformer, backend="reference")
    assert reference.backend == "reference"
    assert reference.run(["logits"], feeds(1, 2))[0].shape == (1, 2)


def test_a_step_the_backend_refuses_runs_on_the_reference_kernels_with_a_warning():
    model = fixture("synthetic/fallback_operator.onnx")
    session = diamond.Session(model)
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    with pytest.warns(diamond.FallbackWarning, match="CumSum"):
        (got,) = session.run(None, {"x": x})
    np.testing.assert_allclose(got, diamond.run(model, {"x": x}, backend="reference")["c"])
    assert any("CumSum" in line for line in session.fallbacks())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session.run(None, {"x": x})  # announced once per session


def test_convert_many_takes_any_executor(tmp_path, transformer):
    bad = fixture("check/broadcast_conflict.onnx")
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = {r.input.name: r for r in diamond.convert_many([transformer, bad], tmp_path, executor=pool)}
    assert results["exported_transformer.onnx"].ok
    assert (tmp_path / "exported_transformer.onnx").exists()
    failed = results["broadcast_conflict.onnx"]
    assert failed.status == "errors" and failed.report is not None
    assert failed.report.errors and failed.report.errors[0].code
    with pytest.raises(RuntimeError, match="another process"):
        failed.report.to_html(tmp_path / "page.html")
