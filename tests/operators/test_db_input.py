"""CreateDB and TensorProtosDBInput: batches from minidb and lmdb DBs, wrap-around,
sharding, the prefetch thread (overlap and clean stop), and errors that name the DB."""

import importlib.util
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import netbrew.distributed.world as world_module
from netbrew.db import create_db, write_tensor_protos
from netbrew.db.reader import DBReader
from netbrew.errors import ModelLoadError, OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient

DB_TYPES = ["minidb", pytest.param("lmdb", marks=pytest.mark.skipif(
    importlib.util.find_spec("lmdb") is None, reason="needs lmdb"))]  # fmt: skip

N = 10
IMAGES = np.arange(N * 2 * 3, dtype=np.float32).reshape(N, 2, 3)
LABELS = np.arange(N, dtype=np.int32)


def make_db(tmp_path, db_type, *arrays, name="train"):
    path = str(tmp_path / (f"{name}.minidb" if db_type == "minidb" else f"{name}_lmdb"))
    write_tensor_protos(path, *(arrays or (IMAGES, LABELS)), db_type=db_type)
    return path


def reader_ws(path, db_type, **shard):
    ws = Workspace()
    ws.run_operator_once(op_def("CreateDB", [], ["reader"], db=path, db_type=db_type, **shard))
    return ws


def batches(ws, steps, outputs=("data", "label"), **args):
    op = op_def("TensorProtosDBInput", ["reader"], list(outputs), **args)
    got = []
    for _ in range(steps):
        ws.run_operator_once(op)
        got.append([ws.fetch_blob(o) for o in outputs])
    return got


def close(ws):
    ws.fetch_blob("reader").item().close()


@pytest.mark.parametrize("db_type", DB_TYPES)
@pytest.mark.parametrize("prefetch", [0, 3])
def test_batches_stack_each_tensor_along_axis_0(tmp_path, db_type, prefetch):
    ws = reader_ws(make_db(tmp_path, db_type), db_type)
    (data, label), (data2, label2) = batches(ws, 2, batch_size=4, prefetch=prefetch)
    assert data.shape == (4, 2, 3) and data.dtype == np.float32
    assert label.shape == (4,) and label.dtype == np.int32
    np.testing.assert_array_equal(data, IMAGES[:4])
    np.testing.assert_array_equal(label, LABELS[:4])
    np.testing.assert_array_equal(data2, IMAGES[4:8])
    np.testing.assert_array_equal(label2, LABELS[4:8])
    close(ws)


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_batch_size_0_outputs_one_record_unstacked(tmp_path, db_type):
    ws = reader_ws(make_db(tmp_path, db_type), db_type)
    (data, label), (data2, _) = batches(ws, 2, prefetch=0)
    assert data.shape == (2, 3) and label.shape == ()
    np.testing.assert_array_equal(data, IMAGES[0])
    np.testing.assert_array_equal(data2, IMAGES[1])
    assert int(label) == 0


@pytest.mark.parametrize("db_type", DB_TYPES)
@pytest.mark.parametrize("prefetch", [0, 2])
def test_wraps_around_at_the_end_as_caffe2(tmp_path, db_type, prefetch):
    ws = reader_ws(make_db(tmp_path, db_type), db_type)
    got = [b[1].tolist() for b in batches(ws, 4, batch_size=4, prefetch=prefetch)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    # a batch larger than the DB wraps inside the batch
    ws2 = reader_ws(make_db(tmp_path, db_type, name="again"), db_type)
    (big,) = [b[1] for b in batches(ws2, 1, batch_size=13, prefetch=prefetch)]
    assert big.tolist() == [*range(10), 0, 1, 2]
    close(ws)
    close(ws2)


@pytest.mark.parametrize("db_type", DB_TYPES)
@pytest.mark.parametrize("num_shards", [2, 3, 4])
def test_shards_are_disjoint_and_cover_the_db(tmp_path, db_type, num_shards):
    path = make_db(tmp_path, db_type)
    seen = []
    for shard_id in range(num_shards):
        ws = reader_ws(path, db_type, num_shards=num_shards, shard_id=shard_id)
        mine = list(range(shard_id, N, num_shards))
        (labels,) = [b[1] for b in batches(ws, 1, batch_size=2 * len(mine), prefetch=2)]
        assert labels.tolist() == mine + mine  # its records in order, then again (wrap)
        seen += mine
        close(ws)
    assert sorted(seen) == list(range(N))  # disjoint and covering


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_shard_by_rank_uses_the_distributed_world(tmp_path, db_type, monkeypatch):
    path = make_db(tmp_path, db_type)
    got = []
    for rank in range(2):
        fake = type("FakeWorld", (), {"rank": rank, "size": 2})()
        monkeypatch.setattr(world_module, "world", lambda fake=fake: fake)
        ws = reader_ws(path, db_type, shard_by_rank=1)
        reader = ws.fetch_blob("reader").item()
        assert (reader.num_shards, reader.shard_id) == (2, rank)
        got.append(batches(ws, 1, batch_size=5)[0][1].tolist())
        close(ws)
    assert got == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


def test_without_shard_by_rank_a_world_of_one_reads_everything(tmp_path):
    ws = reader_ws(make_db(tmp_path, "minidb"), "minidb")
    assert batches(ws, 1, batch_size=N)[0][1].tolist() == list(range(N))
    close(ws)


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_prefetch_overlaps_reading_with_the_training_step(tmp_path, db_type, monkeypatch):
    """Reads take READ seconds a batch and each step STEP seconds: serially a run would
    take steps * (READ + STEP); with the prefetch thread the step hardly waits."""
    path = make_db(tmp_path, db_type)
    per_record, batch, steps, step_time = 0.05, 2, 8, 0.1
    read_time = per_record * batch  # = step_time: the most overlap can save is half
    original = DBReader.read_records

    def slow_read(self, count):
        time.sleep(per_record * count)
        return original(self, count)

    monkeypatch.setattr(DBReader, "read_records", slow_read)
    ws = reader_ws(path, db_type)
    op = op_def("TensorProtosDBInput", ["reader"], ["data", "label"], batch_size=batch)
    waited, labels = 0.0, []
    start = time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        ws.run_operator_once(op)
        waited += time.perf_counter() - t
        labels += ws.fetch_blob("label").tolist()
        time.sleep(step_time)  # the training step
    total = time.perf_counter() - start
    close(ws)
    serial = steps * (read_time + step_time)
    assert labels == [i % N for i in range(steps * batch)]  # same batches, in order
    assert waited < 0.5 * steps * read_time  # only the first batch is waited for
    assert total < 0.8 * serial, (total, serial)


def test_close_stops_the_prefetch_thread(tmp_path):
    ws = reader_ws(make_db(tmp_path, "minidb"), "minidb")
    batches(ws, 1, batch_size=2, prefetch=2)
    reader = ws.fetch_blob("reader").item()
    (worker,) = reader._prefetchers.values()
    assert worker.thread.daemon and worker.thread.is_alive()
    reader.close()
    assert not worker.thread.is_alive()
    assert reader.db.closed
    reader.close()  # idempotent
    with pytest.raises(OperatorError, match="closed"):
        batches(ws, 1, batch_size=2)


def test_interpreter_exits_with_a_prefetch_thread_still_running(tmp_path):
    path = make_db(tmp_path, "minidb")
    code = (
        "from netbrew.executor import Workspace\n"
        "from netbrew.netdef import op_def\n"
        "ws = Workspace()\n"
        f"ws.run_operator_once(op_def('CreateDB', [], ['r'], db={path!r}))\n"
        "op = op_def('TensorProtosDBInput', ['r'], ['x', 'y'], batch_size=3, prefetch=2)\n"
        "ws.run_operator_once(op)\n"
        "print(ws.fetch_blob('y').tolist())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )  # a hang at exit would time out
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 2]"


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_readers_of_one_db_run_side_by_side(tmp_path, db_type):
    path = make_db(tmp_path, db_type)
    readers = [DBReader(path, db_type, 2, s) for s in range(2)]
    got: dict[int, list] = {}

    def pull(i):
        got[i] = [int(readers[i].next_batch(1, 2, prefetch=2)[1][0]) for _ in range(5)]

    threads = [threading.Thread(target=pull, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == {0: [0, 2, 4, 6, 8], 1: [1, 3, 5, 7, 9]}
    for r in readers:
        r.close()


# --- errors name the DB ---


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_a_missing_db_is_named(tmp_path, db_type):
    path = str(tmp_path / "nowhere")
    with pytest.raises(OperatorError, match="nowhere") as e:
        reader_ws(path, db_type)
    assert isinstance(e.value.__cause__, ModelLoadError)


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_an_empty_db_is_named(tmp_path, db_type):
    path = str(tmp_path / f"empty_{db_type}")
    with create_db(db_type, path, "new") as db:
        db.new_transaction().commit()
    with pytest.raises(OperatorError, match=f"{path}.*empty"):
        reader_ws(path, db_type)


def test_a_shard_past_the_last_record_is_refused(tmp_path):
    path = make_db(tmp_path, "minidb", IMAGES[:2], LABELS[:2])
    with pytest.raises(OperatorError, match="train.minidb.*has 2 record.*shard 3 of 4"):
        reader_ws(path, "minidb", num_shards=4, shard_id=3)


@pytest.mark.parametrize(
    ("shard", "message"),
    [({"num_shards": 0}, "num_shards is 0"), ({"num_shards": 2, "shard_id": 2}, "shard_id 2")],
)
def test_bad_shard_arguments(tmp_path, shard, message):
    with pytest.raises(OperatorError, match=message):
        reader_ws(make_db(tmp_path, "minidb"), "minidb", **shard)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_corrupt_record_is_named_with_its_db_and_key(tmp_path, prefetch):
    path = str(tmp_path / "bad.minidb")
    write_tensor_protos(path, IMAGES[:2], LABELS[:2])
    with create_db("minidb", path, "write") as db, db.new_transaction() as txn:
        txn.put("00000002", b"\xff\xff\xff not a TensorProtos")
    ws = reader_ws(path, "minidb")
    with pytest.raises(OperatorError, match=r"bad.minidb: record '00000002' is not a valid"):
        batches(ws, 1, batch_size=3, prefetch=prefetch)
    if prefetch:  # the thread's error is raised again, not swallowed
        with pytest.raises(OperatorError, match="00000002"):
            batches(ws, 1, batch_size=3, prefetch=prefetch)
    close(ws)


def test_a_record_with_another_tensor_count_is_named(tmp_path):
    ws = reader_ws(make_db(tmp_path, "minidb"), "minidb")
    with pytest.raises(OperatorError, match=r"train.minidb: record '00000000' holds 2 tensor"):
        batches(ws, 1, outputs=("data",), batch_size=2, prefetch=0)


def test_records_of_different_shapes_do_not_stack(tmp_path):
    path = str(tmp_path / "ragged.minidb")
    write_tensor_protos(path, np.zeros((1, 3), np.float32))
    with create_db("minidb", path, "write") as db:
        write_tensor_protos(db, np.zeros((1, 4), np.float32), start=1)
    ws = reader_ws(path, "minidb")
    with pytest.raises(OperatorError, match=r"ragged.minidb: record '00000001'.*one shape"):
        batches(ws, 1, outputs=("x",), batch_size=2, prefetch=0)


def test_the_input_must_be_a_reader():
    ws = Workspace()
    ws.feed_blob("reader", np.zeros(3, np.float32))
    with pytest.raises(OperatorError, match="not a DB reader; make it with CreateDB"):
        batches(ws, 1, batch_size=2)


def test_no_gradient_and_not_exportable():
    from netbrew.converters.onnx.to_onnx import NOT_EXPORTABLE

    for op in ("CreateDB", "TensorProtosDBInput"):
        assert isinstance(GRADIENTS[op], NoGradient)
        assert op in NOT_EXPORTABLE
