"""benchmarks/db_input.py: every way of feeding the demo CNN trains, step by step, and the
report has its rows and the overlap line, and keeps the notes written by hand."""

import pytest


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("db_input")


@pytest.mark.parametrize(
    "kind, options",
    [("memory", {}), ("minidb", {}), ("lmdb", {}), ("minidb", {"prefetch": 0, "disk_ms": 1})],
)
def test_step_times(bench, kind, options, tmp_path):
    if kind == "lmdb":
        pytest.importorskip("lmdb")
    times = bench.step_times(kind, steps=3, batch=8, folder=tmp_path, **options)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_the_disk_wait_is_on_the_step_without_prefetch(bench, tmp_path):
    """A lower bound, not a speed check: each step waits out the simulated disk read."""
    times = bench.step_times("minidb", steps=2, batch=4, folder=tmp_path, prefetch=0, disk_ms=30)
    assert min(times) >= 0.03


def test_report(bench, tmp_path):
    pytest.importorskip("lmdb")
    out = tmp_path / "report.md"
    out.write_text(f"old table\n{bench.NOTES}\nnotes by hand\n")
    bench.main(["--rounds", "2", "--steps", "2", "--batch", "8", "--out", str(out)])
    text = out.read_text()
    table = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[0] for line in table] == [
        "| memory", "| minidb", "| lmdb", "| minidb, prefetch 0",
        "| minidb + 2 ms disk wait", "| minidb + 2 ms disk wait, prefetch 0",
    ]  # fmt: skip
    assert "Overlap: with the simulated disk wait, prefetch hides" in text
    assert "Reading a batch alone" in text
    assert "old table" not in text and text.endswith(f"{bench.NOTES}\nnotes by hand\n")
