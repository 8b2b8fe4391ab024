"""Shared paths for the tests of the installed `diamond` package: the
repository's fixtures and the `diamond` command the wheel put beside the
interpreter."""

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def fixture(relative: str) -> Path:
    path = FIXTURES / relative
    assert path.exists(), f"missing fixture {path}"
    return path


def command() -> str:
    """The installed `diamond` command: the one in the interpreter's `bin`, else the one on PATH."""
    beside = Path(sys.executable).parent / "diamond"
    if beside.exists():
        return str(beside)
    found = shutil.which("diamond")
    assert found, "the wheel installs a `diamond` command"
    return found


@pytest.fixture
def transformer() -> Path:
    return fixture("check/exported_transformer.onnx")
