"""The package's surface: what `diamond` exports, the stubs of the native
module matching what it defines, and docstrings on every public function."""

import ast
import inspect
from pathlib import Path

import diamond
from diamond import _native


def test_the_public_names_are_exported_and_documented():
    for name in diamond.__all__:
        assert hasattr(diamond, name), name
    for function in (diamond.check, diamond.convert, diamond.optimize, diamond.run, diamond.convert_many):
        assert inspect.getdoc(function), function.__name__
        assert "model" in inspect.signature(function).parameters or function is diamond.convert_many
    assert issubclass(diamond.ReadError, diamond.DiamondError)
    assert issubclass(diamond.ModelError, diamond.DiamondError)
    assert diamond.PASSES and all(isinstance(p, str) for p in diamond.PASSES)


def test_the_stubs_describe_the_native_module():
    stub = Path(_native.__file__).parent / "_native.pyi"
    tree = ast.parse(stub.read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    native_functions = {n for n in dir(_native) if callable(getattr(_native, n)) and not n[0].isupper()}
    native_classes = {n for n in dir(_native) if inspect.isclass(getattr(_native, n))}
    assert functions == {n for n in native_functions if not n.startswith("__")}
    assert set(classes) == native_classes
    for name, node in classes.items():
        stubbed = {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
        real = {m for m in dir(getattr(_native, name)) if not m.startswith("_")}
        assert stubbed == real, name
    for name in functions:
        native = inspect.signature(getattr(_native, name))
        stubbed = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        assert list(native.parameters) == [a.arg for a in stubbed.args.args], name


def test_the_package_is_typed():
    assert (Path(diamond.__file__).parent / "py.typed").exists()


def test_paths_and_bytes_need_no_onnx():
    import subprocess
    import sys

    from conftest import fixture

    script = (
        "import sys; sys.modules['onnx'] = None\n"
        "import diamond\n"
        f"path = {str(fixture('check/exported_transformer.onnx'))!r}\n"
        "assert diamond.check(path).ok\n"
        "assert isinstance(diamond.convert(open(path, 'rb').read()), bytes)\n"
        "assert 'onnx' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
