"""`netbrew demo --db`: the digits written to a DB first, then trained from it."""

import importlib.util
import subprocess
import sys

import pytest

LMDB = pytest.mark.skipif(importlib.util.find_spec("lmdb") is None, reason="needs lmdb")


@pytest.mark.parametrize("db_type", ["minidb", pytest.param("lmdb", marks=LMDB)])
def test_demo_from_a_db_reaches_97_percent(tmp_path, db_type):
    out_dir = tmp_path / "demo"
    out = subprocess.run(
        [sys.executable, "-m", "netbrew.cli", "demo", "--db", db_type, "-o", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert f"wrote the training split to {db_type}" in out.stdout
    line = next(li for li in out.stdout.splitlines() if li.startswith("held-out accuracy"))
    accuracy = float(line.split(":")[1].split("%")[0]) / 100
    assert accuracy >= 0.97, out.stdout
    assert "predictions identical" in out.stdout
    assert (out_dir / f"train_{db_type}").exists() and (out_dir / "init_net.pb").exists()


def test_demo_refuses_an_unknown_db(capsys):
    from netbrew.cli import main

    with pytest.raises(SystemExit):
        main(["demo", "--db", "leveldb"])
    assert "invalid choice: 'leveldb'" in capsys.readouterr().err
