import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/submissions.py

os.environ.setdefault("MPLBACKEND", "agg")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
