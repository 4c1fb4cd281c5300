"""The docker-compose stack, started natively on loopback (DESIGN section 7; no Docker engine here).

What ``docker-compose.yml`` starts, as local processes: a Prefect server on the local PostgreSQL (a
fresh database, created here and dropped at the end), a process work pool with a ``prefect worker``,
a Dask scheduler with 2 workers, and an S3 endpoint (moto's server mode instead of MinIO). The flow
is deployed from ``infra/prefect.yaml`` with ``prefect deploy`` (only its pull step's working
directory is changed from the image's ``/app`` to this checkout), triggered the way the UI does it
(``run_deployment`` with parameters), and checked: the run went through the worker, its Dask work
ran on the cluster, the artifact on S3 is byte-identical to a local in-process build, and a second
trigger with the same inputs finishes with every task state named ``Cached``.

Every process runs under ``timeout`` in its own process group (nothing outlives a killed test run)
and is stopped by the fixture; everything Prefect writes goes to a temporary ``PREFECT_HOME``.
PostgreSQL: ``127.0.0.1:5432`` with trust auth and a database ``test`` (CI provides it), user
``$PREPFLOW_IT_PG_USER`` or ``root`` or ``postgres``; without one the test fails, naming what it needs.
Everything else (Prefect server, worker, Dask, the S3 endpoint) it starts itself.

Against the same PostgreSQL-backed server it then checks what a Prefect user relies on (issue 22), with
``prepflow run`` pointed at it by ``PREFECT_API_URL``: a run is named and tagged after its dataset,
config and artifact, and its report artifact links the report over http (a presigned URL of the S3
object); four concurrent runs all succeed with no 503; a SIGKILLed run shows Crashed once the next run
has started.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.helpers import worker_memory_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "examples" / "titanic"
PG_HOST, PG_PORT, PG_DATABASE = "127.0.0.1", 5432, "test"
LIFETIME_S = 1800  # hard limit on every process this test starts (a loaded 2-core machine needs ~25 min)
BUCKET = "prepflow"
POOL = "prepflow-pool"
DEPLOYMENT = "preprocess/preprocess-nightly"
# Tasks of the flow that are not cached pipeline stages (the HTML report is rewritten on every run).
NOT_STAGES = {"report"}
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg(user: str, sql: str | None = None) -> None:
    import asyncpg

    async def go() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=user, database=PG_DATABASE, timeout=5)
        try:
            if sql:
                await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(go())


def _pg_user() -> str | None:
    candidates = [os.environ.get("PREPFLOW_IT_PG_USER"), "root", "postgres"]
    for user in dict.fromkeys(c for c in candidates if c):
        try:
            _pg(user)
            return user
        except Exception:
            continue
    return None


@dataclass
class Stack:
    tmp: Path
    env: dict
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    api_url: str = ""
    s3_endpoint: str = ""
    dask_address: str = ""
    database: str = ""

    def start(self, name: str, argv: list[str], env: dict | None = None, cwd: Path | None = None) -> None:
        log = open(self.tmp / "logs" / f"{name}.log", "wb")
        # `timeout` bounds the process's life; a new session makes it (and the children it starts,
        # e.g. the worker's flow-run processes, Dask's nanny workers) one process group to stop.
        self.procs[name] = subprocess.Popen(
            ["timeout", "-k", "10", str(LIFETIME_S), *argv], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={**self.env, **(env or {})}, cwd=str(cwd or self.tmp),
            start_new_session=True)
        log.close()

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group may outlive its leader (a flow run, a nanny's worker)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    def logs(self, lines: int = 25) -> str:
        out = []
        for path in sorted((self.tmp / "logs").glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name} ---\n" + "\n".join(tail))
        return "\n".join(out)

    def wait_http(self, name: str, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise AssertionError(f"{name} exited with {self.procs[name].returncode}\n{self.logs()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"{name} did not answer {url} within {timeout:.0f} s\n{self.logs()}")

    def run(self, name: str, argv: list[str], timeout: float, cwd: Path | None = None) -> str:
        """Run a short command (same bounded lifetime) and return its output; fail with the logs."""
        try:
            proc = subprocess.run(["timeout", "-k", "5", str(int(timeout)), *argv], capture_output=True,
                                  text=True, env=self.env, cwd=str(cwd or self.tmp), timeout=timeout + 15)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{name} hung\n{self.logs()}") from exc
        (self.tmp / "logs" / f"{name}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    user = _pg_user()
    if user is None:
        pytest.fail(f"the native stack needs PostgreSQL with trust auth at {PG_HOST}:{PG_PORT}, database "
                    f"'{PG_DATABASE}', user $PREPFLOW_IT_PG_USER, root or postgres: none answered")
    tmp = tmp_path_factory.mktemp("native-stack")
    (tmp / "logs").mkdir()
    database = f"prepflow_it_{uuid.uuid4().hex[:12]}"
    ports = {name: _free_port() for name in ("prefect", "s3", "dask", "dask_dashboard")}
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PREPFLOW_", "AWS_", "S3_"))}
    env.update({
        "PREFECT_HOME": str(tmp / "prefect-home"),
        "PREFECT_API_URL": f"http://127.0.0.1:{ports['prefect']}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "0.25",
        "PREPFLOW_HOME": str(tmp / "prepflow-home"),
        "PREPFLOW_ARTIFACT_CACHE": str(tmp / "artifact-cache"),
        "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
        # what the compose file gives the worker and the Dask services
        **S3_KEYS, "S3_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
    })
    st = Stack(tmp=tmp, env=env, api_url=env["PREFECT_API_URL"], s3_endpoint=endpoint,
               dask_address=f"tcp://127.0.0.1:{ports['dask']}", database=database)
    _pg(user, f'CREATE DATABASE "{database}"')
    try:
        # The Prefect server first: its migrations on a fresh database take the longest (~15-25 s).
        st.start("prefect-server", [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                                    "--port", str(ports["prefect"]), "--no-ui"],
                 env={"PREFECT_API_DATABASE_CONNECTION_URL":
                      f"postgresql+asyncpg://{user}@{PG_HOST}:{PG_PORT}/{database}",
                      "PREFECT_SERVER_API_HOST": "127.0.0.1",
                      "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"})
        st.start("s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(ports["s3"])])
        st.start("dask-scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                                    str(ports["dask"]), "--dashboard-address", f"127.0.0.1:{ports['dask_dashboard']}"])
        st.wait_http("dask-scheduler", f"http://127.0.0.1:{ports['dask_dashboard']}/health", 60)
        for i in (1, 2):  # like the compose file's two replicas; started outside the checkout on purpose
            (tmp / f"dask-worker-{i}").mkdir()
            st.start(f"dask-worker-{i}", [str(BIN / "dask"), "worker", st.dask_address, "--nworkers", "1",
                                          "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
                                          "--local-directory", str(tmp / f"dask-worker-{i}")],
                     env=worker_memory_env(), cwd=tmp / f"dask-worker-{i}")  # the compose file's settings
        st.wait_http("s3", endpoint, 60)
        import boto3

        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket=BUCKET)  # what the compose file's minio-init does
        s3.upload_file(str(EXAMPLE / "titanic.csv"), BUCKET, "data/titanic.csv")
        st.wait_http("prefect-server", f"{st.api_url}/health", 120)
        yield st
    finally:
        st.stop_all()
        try:
            _pg(user, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        except Exception as exc:  # never hide the test's own failure behind a cleanup error
            print(f"could not drop {database}: {exc}", file=sys.stderr)


def _prefect_settings(stack: Stack):
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    return temporary_settings(updates={PREFECT_API_URL: stack.api_url, PREFECT_HOME: stack.tmp / "prefect-home"})


def _task_states(flow_run_id, expected: int | None, timeout: float = 30.0) -> dict[str, tuple[str, str]]:
    """``{task name: (state type, state name)}`` once every task run is final (task-run states reach
    the API through events, a moment after the flow run's own state)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline = time.monotonic() + timeout
    while True:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        states = {tr.name.rsplit("-", 1)[0]: (tr.state.type.value, tr.state.name) for tr in runs if tr.state}
        final = all(t in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for t, _ in states.values())
        if final and "publish" in states and (expected is None or len(states) == expected):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def _reference_artifact(tmp: Path, monkeypatch) -> dict[str, bytes]:
    """The same config and data built in-process with Dask's local scheduler."""
    from tests.helpers import artifact_files, run

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    result = run(config, EXAMPLE / "titanic.csv", tmp, npartitions=3)
    return artifact_files(result.artifact["artifact_path"])


def test_deploy_trigger_and_rerun_cached_on_the_native_stack(stack, tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterDeploymentId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.deployments import run_deployment

    started = time.monotonic()
    # The work pool (the compose worker creates it with --type process; so would this worker, but
    # `prefect deploy` needs it to exist first) and its worker.
    with _prefect_settings(stack), get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=POOL, type="process"))
    stack.start("prefect-worker", [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process"],
                env={"PREFECT_WORKER_QUERY_SECONDS": "1"})

    # `prefect deploy --prefect-file infra/prefect.yaml`, with the image's /app replaced by this checkout.
    spec = yaml.safe_load((ROOT / "infra" / "prefect.yaml").read_text())
    (step,) = spec["pull"]
    step["prefect.deployments.steps.set_working_directory"]["directory"] = str(ROOT)
    prefect_file = stack.tmp / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    stack.run("prefect-deploy", [str(BIN / "prefect"), "--no-prompt", "deploy", "--prefect-file",
                                 str(prefect_file), "--all"], timeout=120, cwd=ROOT)

    from distributed import Client

    with Client(stack.dask_address, set_as_default=False, timeout="30s") as dask_client:
        dask_client.wait_for_workers(2, timeout=60)
        parameters = {"dataset": f"s3://{BUCKET}/data/titanic.csv", "config": str(EXAMPLE / "config.yaml"),
                      "output": f"s3://{BUCKET}/artifacts", "cache_dir": str(stack.tmp / "cache"),
                      "dask_address": stack.dask_address, "npartitions": 3}
        with _prefect_settings(stack), get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(DEPLOYMENT)
            assert deployment.work_pool_name == POOL
            assert [s.schedule.cron for s in deployment.schedules] == ["0 2 * * *"]
            first_start = time.monotonic()
            first = run_deployment(DEPLOYMENT, parameters=parameters, timeout=150, poll_interval=1)
            first_s = time.monotonic() - first_start
            assert first.state.is_completed(), f"{first.state}\n{stack.logs()}"
            assert first.work_pool_name == POOL
            first_states = _task_states(first.id, None)
            prefixes = dask_client.run_on_scheduler(
                lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
            executed = dask_client.run(lambda dask_worker: dask_worker.state.executed_count)

            second_start = time.monotonic()
            second = run_deployment(DEPLOYMENT, parameters=parameters, timeout=150, poll_interval=1)
            second_s = time.monotonic() - second_start
            assert second.state.is_completed(), f"{second.state}\n{stack.logs()}"
            second_states = _task_states(second.id, len(first_states))
            # the cron schedule produced runs: the server's scheduler service works on this database
            upcoming = client.read_flow_runs(limit=10, flow_run_filter=FlowRunFilter(
                deployment_id=FlowRunFilterDeploymentId(any_=[deployment.id]),
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))))

    # first run: every stage computed, on the cluster
    assert {"ingest", "split", "fill_missing", "balance", "vocab", "encode", "publish"} <= set(first_states)
    assert all(state == ("COMPLETED", "Completed") for state in first_states.values()), first_states
    assert "encode_partition" in prefixes and "partition" in prefixes, prefixes
    assert sum(executed.values()) > 0, executed
    # second trigger, same inputs: every stage is served from the cache
    assert second_states.keys() == first_states.keys()
    stages = {k: v for k, v in second_states.items() if k not in NOT_STAGES}
    assert all(state == ("COMPLETED", "Cached") for state in stages.values()), second_states
    assert upcoming and all(r.expected_start_time.hour == 2 for r in upcoming), upcoming

    # the artifact on S3: complete, verified, and byte-identical to a local in-process build
    for k, v in {**S3_KEYS, "S3_ENDPOINT_URL": stack.s3_endpoint, "AWS_ENDPOINT_URL_S3": stack.s3_endpoint,
                 "PREPFLOW_ARTIFACT_CACHE": str(tmp_path / "fetched")}.items():
        monkeypatch.setenv(k, v)
    import boto3
    import fsspec

    from storage import remote
    from tests.helpers import artifact_files, without_created_at

    fsspec.filesystem("s3").clear_instance_cache()  # the endpoint from this environment
    s3 = boto3.client("s3", endpoint_url=stack.s3_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    latest = s3.get_object(Bucket=BUCKET, Key="artifacts/LATEST")["Body"].read().decode().strip()
    local = remote.fetch(f"s3://{BUCKET}/artifacts/{latest}", verify=True)
    reference = _reference_artifact(tmp_path / "reference", monkeypatch)
    published = artifact_files(local)
    assert sorted(published) == sorted(reference)
    assert without_created_at(published) == without_created_at(reference)
    print(f"native stack: stack up + deploy + 2 runs in {time.monotonic() - started:.1f} s "
          f"(first run {first_s:.1f} s, cached rerun {second_s:.1f} s)")


def _flow_run_state(stack: Stack, flow_run_id: str) -> str:
    from flows import run_registry

    return run_registry._api("GET", f"{stack.api_url}/flow_runs/{flow_run_id}")["state"]["type"]


def test_cli_runs_are_named_linked_concurrent_and_crash_marked_on_postgres(stack, tmp_path):
    """Issue 22 against the PostgreSQL-backed server: ``prepflow run`` with ``PREFECT_API_URL`` set."""
    import re
    import shutil

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterTags,
    )

    from flows import local_server, run_registry
    from flows.run_labels import config_hash
    from tasks.config.loader import load_config

    runs_dir = Path(stack.env["PREPFLOW_HOME"]) / "servers" / local_server.installation_key() / "runs"
    # A run killed by SIGKILL (its process holds the run's lock; nothing else tells the server).
    marker = tmp_path / "running"
    stack.start("crash-probe", [sys.executable, "-m", "tests.crash_probe", str(marker)], cwd=ROOT)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert stack.procs["crash-probe"].poll() is None, stack.logs()
        assert time.monotonic() < deadline, f"the crash probe never ran\n{stack.logs()}"
        time.sleep(0.5)
    assert marker.read_text() == "remote"  # PREFECT_API_URL: no local server started
    (crashed_id,) = run_registry.live_runs(runs_dir)
    assert _flow_run_state(stack, crashed_id) == "RUNNING"
    os.killpg(stack.procs["crash-probe"].pid, signal.SIGKILL)
    stack.procs["crash-probe"].wait()

    # Four concurrent runs (the first of them is "the next run", which marks the killed one Crashed).
    dataset = tmp_path / f"native-{uuid.uuid4().hex[:8]}.csv"
    shutil.copyfile(EXAMPLE / "titanic.csv", dataset)
    runs = []
    started = time.monotonic()
    for i in range(4):
        out = open(tmp_path / f"run{i}.out", "wb")
        err = open(tmp_path / f"run{i}.err", "wb")
        runs.append(subprocess.Popen(
            ["timeout", "-k", "10", "900", sys.executable, "-m", "flows.cli", "run", str(EXAMPLE / "config.yaml"),
             "--dataset", str(dataset), "--output", f"s3://{BUCKET}/concurrent/{i}", "--cache-dir",
             str(tmp_path / f"cache{i}"), "--json"], cwd=ROOT, env=stack.env, stdout=out, stderr=err))
        out.close()
        err.close()
    while _flow_run_state(stack, crashed_id) != "CRASHED":
        assert time.monotonic() - started < 120, "the killed run is not Crashed 2 minutes after the next run"
        time.sleep(2)
    codes = [run.wait() for run in runs]
    errs = [(tmp_path / f"run{i}.err").read_text() for i in range(4)]
    assert codes == [0] * 4, "\n---\n".join(e[-2000:] for e in errs)
    assert all("503" not in e and "Service Unavailable" not in e for e in errs), errs
    summaries = [json.loads((tmp_path / f"run{i}.out").read_text().strip().splitlines()[-1]) for i in range(4)]
    assert all("ui_record_incomplete" not in s for s in summaries), summaries
    (artifact_id,) = {s["artifact_id"] for s in summaries}

    digest = config_hash(load_config(EXAMPLE / "config.yaml"))
    with _prefect_settings(stack), get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[f"dataset:{dataset.name}"])))
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[r.id for r in flow_runs])))
    assert len(flow_runs) == 4 and all(r.state.is_completed() for r in flow_runs), flow_runs
    for run in flow_runs:
        assert run.name == f"{dataset.name} · config.yaml · {digest[:6]}"
        assert {f"config:{digest}", f"artifact:{artifact_id}"} <= set(run.tags), run.tags
    reports = [a for a in artifacts if a.key == "prepflow-report"]
    assert len(reports) == 4, [a.key for a in artifacts]
    for report in reports:
        (link,) = re.findall(r"\[Open the data report\]\((http[^)]+)\)", report.data)
        assert link.startswith(f"{stack.s3_endpoint}/{BUCKET}/concurrent/"), link
        with urllib.request.urlopen(link, timeout=30) as resp:  # presigned: no credentials needed
            assert resp.status == 200 and artifact_id in resp.read().decode()
