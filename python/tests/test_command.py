"""The `diamond` command the wheel installs, and the equality of the Python
API with `diamond check --json` on every fixture model the command checks:
the same values and diagnostics from the attributes, the same document
from `to_json()`, and `ReadError` with the command's message exactly where
it exits 2."""

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import diamond
from conftest import FIXTURES, ROOT, command, fixture


def cli(*args):
    return subprocess.run([command(), *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def test_the_command_is_installed_and_checks():
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("diamond ")
    assert version.stdout.split()[-1] == diamond.__version__
    model = fixture("check/exported_transformer.onnx")
    out = cli("check", model, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["model"] == str(model)
    assert cli("check", fixture("check/broadcast_conflict.onnx")).returncode == 1
    unreadable = cli("check", fixture("malformed/truncated_03.onnx"))
    assert unreadable.returncode == 2 and unreadable.stderr.startswith("error: ")


def test_the_command_converts_and_runs(tmp_path):
    model = fixture("check/exported_transformer.onnx")
    out = cli("convert", model, "-o", tmp_path / "t.onnx")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "t.onnx").read_bytes() == diamond.convert(model)
    ran = cli("run", fixture("onnx-node/test_add_bcast/model.onnx"), "--input",
              fixture("onnx-node/test_add_bcast/test_data_set_0"),
              "--compare", fixture("onnx-node/test_add_bcast/test_data_set_0"))  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def fixture_models():
    """Every model file among the fixtures: ONNX, TorchScript archives and IR text."""
    found = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and (path.suffix in (".onnx", ".pt") or path.name.endswith(".ir.txt")):
            found.append(path)
    return found


def as_document(report: diamond.Report) -> dict:
    """The `--json` document rebuilt from the report's attributes."""
    values = {}
    for name, v in report.values.items():
        entry = {} if v.kind == "tensor" else {"kind": v.kind}
        entry["dtype"] = v.dtype
        entry["shape"] = None if v.shape is None else list(v.shape)
        values[name] = entry
    diagnostics = [
        {
            "severity": d.severity,
            "code": d.code,
            "node": d.node,
            "op": d.op,
            "node_index": d.node_index,
            "graph": d.graph,
            "operand": d.operand,
            "axis": d.axis,
            "message": d.message,
            "chain": list(d.chain),
            "help": d.help,
            "help_uri": d.help_uri,
            "condition": d.condition,
            "condition_exact": d.condition_exact,
        }
        for d in report.diagnostics
    ]
    return {
        "model": report.model,
        "inputs": report.inputs,
        "outputs": report.outputs,
        "values": values,
        "inferred_from_use": report.inferred_from_use,
        "from_declaration": report.from_declaration,
        "diagnostics": diagnostics,
    }


def compare_one(path):
    """None when the API and the command agree on `path`, else what differs."""
    out = cli("check", path, "--json")
    try:
        report = diamond.check(path)
    except diamond.ReadError as error:
        if out.returncode != 2:
            return f"{path}: ReadError ({error}) but the command exits {out.returncode}"
        if f"error: {error}" != out.stderr.strip():
            return f"{path}: ReadError says {error!r}, the command {out.stderr.strip()!r}"
        return None
    if out.returncode not in (0, 1):
        return f"{path}: the command exits {out.returncode} ({out.stderr.strip()}) but the API read it"
    if report.ok != (out.returncode == 0):
        return f"{path}: report.ok is {report.ok}, the command exits {out.returncode}"
    document = json.loads(out.stdout)
    if as_document(report) != document:
        return f"{path}: the report's attributes differ from --json"
    if report.to_json() + "\n" != out.stdout:
        return f"{path}: to_json() differs from the command's output"
    return None


def test_the_api_reports_what_the_command_reports_on_every_fixture():
    models = fixture_models()
    assert len(models) >= 2163
    with ThreadPoolExecutor(max_workers=4) as pool:
        problems = [p for p in pool.map(compare_one, models) if p is not None]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("name", ["check/broadcast_conflict.onnx", "check/dynamic_specialized.onnx"])
def test_bytes_and_paths_differ_only_in_the_model_name(name):
    path = fixture(name)
    by_bytes = as_document(diamond.check(path.read_bytes()))
    by_command = json.loads(cli("check", path, "--json").stdout)
    assert by_bytes.pop("model") == "<bytes>"
    by_command.pop("model")
    assert by_bytes == by_command


def test_bind_and_strict_units_match_the_command(tmp_path):
    import numpy as np
    import onnx

    from test_check import reshape_model

    model = tmp_path / "reshape.onnx"
    onnx.save(reshape_model(), str(model))
    np.save(tmp_path / "shape.npy", np.array([3, 2], dtype=np.int64))
    by_command = json.loads(cli("check", model, "--json", "--bind", tmp_path / "shape.npy").stdout)
    by_api = diamond.check(model, bind={"shape": np.array([3, 2], dtype=np.int64)})
    assert as_document(by_api) == by_command
    assert by_command["values"]["y"]["shape"] == [3, 2]
    stated = fixture("check/stated_unit.onnx")
    strict = json.loads(cli("check", stated, "--json", "--strict-units").stdout)
    assert as_document(diamond.check(stated, strict_units=True)) == strict
