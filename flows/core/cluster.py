"""The flow on a Dask cluster: the task runner `--cluster` names, and fanning work out.

`local:N` starts N worker processes on this machine for the run (a Dask LocalCluster);
`tcp://HOST:PORT` connects to the scheduler of a running cluster. Either way the tasks
go through prefect-dask, so each piece is a Prefect task run with its own state and logs.
Workers share the warehouse folder (parse and embedding caches) with the flow, and get
its Prefect API with each task.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

LOCAL = re.compile(r"local:(\d+)")


class ClusterError(ValueError):
    """A --cluster value that names no cluster."""


def check_spec(spec: str) -> str:
    """`spec` if it names a cluster paperlake can use (local:N or tcp://HOST:PORT)."""
    if (m := LOCAL.fullmatch(spec)) and int(m.group(1)) > 0:
        return spec
    if re.fullmatch(r"(tcp|tls)://[^\s/:]+:\d+", spec):
        return spec
    raise ClusterError(
        f"cluster {spec!r} must be local:N (N workers on this machine, N > 0) or "
        "tcp://HOST:PORT (the scheduler of a running Dask cluster)"
    )


def worker_threads(workers: int) -> int:
    """Cores each of `workers` local workers computes with: its share of this machine."""
    return max(1, (os.cpu_count() or 1) // workers)


def task_runner(spec: str):
    """The prefect-dask task runner for `spec`.

    A local worker runs one task at a time (threads_per_worker=1) and computes with its
    share of the cores through torch and FAISS (PAPERLAKE_THREADS) and tokenizers
    (RAYON_NUM_THREADS): Dask's nanny pins OpenMP and MKL to one thread, and every worker
    taking all cores would oversubscribe.
    """
    from prefect_dask import DaskTaskRunner

    check_spec(spec)
    # Dask's own start and stop chatter (every worker and connection) would bury the
    # run's log; its warnings and errors still show.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    if m := LOCAL.fullmatch(spec):
        workers = int(m.group(1))
        share = str(worker_threads(workers))
        return DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={
                "n_workers": workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
                # Tokenizers' threads (rayon's) take the worker's share of the cores too.
                "env": {name: share for name in ("PAPERLAKE_THREADS", "RAYON_NUM_THREADS")},
            },
        )
    return DaskTaskRunner(address=spec)


def cluster_workers() -> int:
    """Workers of the flow run's Dask cluster; 0 when its tasks run in this process.

    A flow with a Dask task runner has imported prefect-dask; without it, Dask is not
    imported here just to find that out.
    """
    from prefect.context import FlowRunContext

    dask = sys.modules.get("prefect_dask")
    context = FlowRunContext.get()
    runner = context.task_runner if context else None
    if dask is None or not isinstance(runner, dask.DaskTaskRunner):
        return 0
    return len(runner.client.scheduler_info()["workers"])


def fan_out(task: Any, items: Sequence[Any], **shared: Any) -> list[Any]:
    """Run `task` once per item on the flow run's task runner, all at once; their results.

    `shared` arguments go to every task run unchanged.
    """
    from prefect import unmapped

    if not items:
        return []
    futures = task.map(list(items), **{k: unmapped(v) for k, v in shared.items()})
    return [future.result() for future in futures]


def on_workers(task: Any, **shared: Any) -> Callable[[Sequence[Any]], list[Any]] | None:
    """A function that runs `task` on each of its items on the cluster, or None when the
    flow runs in-process (the stage then does the work itself, as it always has)."""
    if not cluster_workers():
        return None
    return lambda items: fan_out(task, items, **shared)
