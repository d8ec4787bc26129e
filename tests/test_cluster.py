"""The flow on a real Dask cluster (a LocalCluster of 2 worker processes) through prefect-dask."""

from __future__ import annotations

import asyncio
import ipaddress
import os

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from flows import embed
from flows.cli import app
from flows.core.cluster import ClusterError, check_spec, task_runner
from flows.core.settings import Settings
from flows.derive import neighbours
from flows.embed import papers, vectors
from flows.publish import history
from tests.conftest import SAMPLE_RAW


@pytest.fixture(scope="module")
def dask_cluster():
    """A real LocalCluster with 2 single-threaded worker processes, shared by the module."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster


def task_run_names(flow_run: str) -> list[str]:
    """Names of the task runs the Prefect API recorded for a flow run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async def read() -> list[str]:
        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[flow_run]))
            )
            return sorted(r.name.rsplit("-", 1)[0] for r in runs)

    return asyncio.run(read())


def test_run_on_a_cluster_publishes_what_one_process_does(prefect_server, dask_cluster, tmp_path):
    from flows.pipeline import flow_for, paperlake

    # Batches of 4: the 38 texts make 3 shards of whole 16-text chunks.
    common = {"raw": [str(SAMPLE_RAW)], "batch_size": 4}
    local = Settings(warehouse=tmp_path / "here", raw=(SAMPLE_RAW,), batch_size=4)
    spread = local.with_(warehouse=tmp_path / "spread", cluster=dask_cluster.scheduler_address)
    here = paperlake(warehouse=str(local.warehouse), **common)
    there = flow_for(spread)(warehouse=str(spread.warehouse), **common)

    assert (here.papers, there.papers) == (38, 38)
    assert there.embedded == 38 and there.files_parsed == 2
    _, here_tables, here_whole = history.checksums(local)
    _, there_tables, there_whole = history.checksums(spread)
    assert there_tables == here_tables and there_whole == here_whole
    # Every piece ran as a task run of the flow's own API (no server per worker).
    names = task_run_names(there.flow_run)
    assert names.count("parse_file") == 2
    assert names.count("encode_shard") == 3
    assert names.count("neighbor_rows") == 1
    assert {"ingest_raw", "embed_papers", "derive_tables", "publish_snapshot"} <= set(names)


def test_local_spec_gives_workers_their_share_of_the_cores():
    runner = task_runner("local:2")
    assert runner.cluster_kwargs["n_workers"] == 2
    assert runner.cluster_kwargs["threads_per_worker"] == 1
    env = runner.cluster_kwargs["env"]
    share = max(1, (os.cpu_count() or 1) // 2)
    assert env["PAPERLAKE_THREADS"] == env["RAYON_NUM_THREADS"] == str(share)
    assert task_runner("tcp://10.0.0.5:8786").address == "tcp://10.0.0.5:8786"


@pytest.mark.parametrize("spec", ["local:0", "local", "dask", "tcp://host", "10.0.0.5:8786"])
def test_a_cluster_that_names_nothing_is_refused(spec, tmp_path):
    with pytest.raises(ClusterError, match="must be local:N"):
        check_spec(spec)
    result = CliRunner().invoke(
        app, ["run", "--raw", str(SAMPLE_RAW), "-w", str(tmp_path / "w"), "--cluster", spec]
    )
    assert result.exit_code == 1
    assert f"cluster {spec!r} must be local:N" in result.output
    assert "Traceback" not in result.output


def test_shards_follow_the_encoders_batches():
    texts = [f"text {'x' * (i % 7)} {i}" for i in range(70)]
    todo = pl.DataFrame({"text_sha256": [f"h{i}" for i in range(70)], "text": texts})
    parts = papers.shards(todo, batch_size=4, pieces=3)
    # Whole chunks of batch_size x CHUNK_BATCHES texts, in encode's longest-first order.
    chunk = 4 * vectors.CHUNK_BATCHES
    assert [p.height for p in parts] == [2 * chunk, 2 * chunk, 70 - 4 * chunk]
    joined = pl.concat(parts)["text"].to_list()
    assert joined == [texts[i] for i in vectors.encoding_order(texts)]


@pytest.mark.parametrize("method", ["exact", "hnsw", "ivf"])
def test_search_in_row_ranges_equals_one_search(method, tmp_path):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(5000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[4990:] = vectors[0]  # a crowd of copies: rows the graph search checks exactly
    ids = [f"p{i:05d}" for i in range(len(vectors))]
    whole = neighbours.candidates(ids, vectors, 32, 0.8, method)
    seen = []

    def fan(ranges, matrix, graph):  # each range from the files, as a worker reads them
        seen.append((ranges, graph is not None))
        return [neighbours.search_rows(r, matrix, graph, 32, 0.8) for r in ranges]

    rows = neighbours.nearest_in_pieces(ids, vectors, 32, 0.8, method, 20_000, tmp_path, fan, 2)
    pieces = neighbours.id_frame(ids, *rows)
    # 10 blocks of BLOCK_ROWS (512) rows, 5 a piece
    assert seen == [([(0, 2560), (2560, 5000)], method != "exact")]
    assert pieces.equals(whole)  # bit for bit
    copies = pieces.filter((pl.col("paper_id") == "p00000") & (pl.col("score") > 0.9999))
    assert copies.height == 10  # its 10 copies, all found
    assert list(tmp_path.iterdir()) == []  # the matrix and graph files are gone


def test_a_worker_computes_with_its_share_of_the_cores(dask_cluster):
    from distributed import Client

    with Client(dask_cluster, set_as_default=False) as client:
        threads = client.submit(embed.compute_threads, pure=False).result()
    # 2 workers of one task slot each on this host.
    assert threads == max(1, (os.cpu_count() or 1) // 2)


def test_a_cluster_on_another_host_gets_an_api_it_can_reach():
    from flows.serve.prefect_server import api_address

    loopback = ("127.0.0.1", "127.0.0.1")
    assert api_address(None) == loopback
    assert api_address("local:2") == loopback
    assert api_address("tcp://127.0.0.1:8786") == loopback
    assert api_address("tcp://localhost:8786") == loopback
    bind, advertise = api_address("tcp://192.0.2.1:8786")  # TEST-NET-1: another host
    assert bind == "0.0.0.0"
    assert not ipaddress.ip_address(advertise).is_loopback
