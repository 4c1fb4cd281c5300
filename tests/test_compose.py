"""Static checks of the docker-compose stack and infra/ files (DESIGN.md section 7).

No Docker engine runs on the development machines, so these tests never start
containers: they validate docker-compose.yml against the vendored Compose Specification
schema and check the references between compose, the Dockerfile, prefect.yaml, the CI
example and the repository. The services themselves are exercised natively by the
integration tests.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import sys
from datetime import datetime, timezone
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "tests" / "data" / "compose-spec.json"
DOCKERFILE = ROOT / "infra" / "Dockerfile"
PREFECT_YAML = ROOT / "infra" / "prefect.yaml"
DATA_GATE = ROOT / "infra" / "ci" / "github-data-gate.yml"

PROJECT_SERVICES = {"prefect-server", "prefect-worker", "dask-scheduler", "dask-worker"}
REQUIRED_PORTS = {4200, 8786, 8787, 9000}
FLOW_PARAMETERS = {"config", "dataset", "output", "cache_dir", "npartitions", "dask_address"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def schema_validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture(scope="module")
def prefect_yaml() -> dict:
    return yaml.safe_load(PREFECT_YAML.read_text())


def _env(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def _published_ports(service: dict) -> set[int]:
    out = set()
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.add(int(port.get("published") or port["target"]))
        else:
            # [HOST_IP:]HOST:CONTAINER[/proto] or a bare CONTAINER port
            spec = str(port).split("/")[0]
            out.add(int(spec.split(":")[-2] if ":" in spec else spec))
    return out


def _command(service: dict) -> list[str]:
    cmd = service.get("command")
    if isinstance(cmd, str):
        return cmd.split()
    return list(cmd or [])


# --- docker-compose.yml ---------------------------------------------------------------


def test_schema_is_the_compose_spec():
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["title"] == "Compose Specification"
    assert "service" in schema["definitions"]
    assert "healthcheck" in schema["definitions"]


def test_compose_validates_against_compose_spec(compose, schema_validator):
    errors = sorted(schema_validator.iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_schema_rejects_a_broken_compose_file(compose, schema_validator):
    # Guard against a validator that accepts anything.
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["healthcheck"]["intervall"] = "5s"
    assert list(schema_validator.iter_errors(broken))
    broken = copy.deepcopy(compose)
    broken["services"]["prefect-server"]["depends_on"]["postgres"]["condition"] = "healthy"
    assert list(schema_validator.iter_errors(broken))


def test_all_services_present(services):
    expected = {"postgres", "prefect-server", "prefect-worker", "dask-scheduler",
                "dask-worker", "minio", "minio-init"}
    assert expected <= set(services)


def test_build_contexts_and_dockerfiles_exist(services):
    built = {name: svc["build"] for name, svc in services.items() if "build" in svc}
    assert built, "no service builds the project image"
    for name, build in built.items():
        if isinstance(build, str):
            build = {"context": build}
        context = (ROOT / build.get("context", ".")).resolve()
        assert context.is_dir(), f"{name}: build context {context} missing"
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: Dockerfile {dockerfile} missing"


def test_project_services_share_one_image(services):
    project = {name: svc for name, svc in services.items() if "build" in svc}
    assert PROJECT_SERVICES <= set(project), set(project)
    images = {(svc.get("image"), json.dumps(svc["build"], sort_keys=True))
              for svc in project.values()}
    assert len(images) == 1, f"project services use different images/builds: {images}"
    (image, build), = images
    assert image, "project image should be tagged so every service reuses it"
    assert json.loads(build)["dockerfile"] == "infra/Dockerfile"


def test_required_ports_published(services):
    published = set().union(*(_published_ports(svc) for svc in services.values()))
    assert REQUIRED_PORTS <= published, REQUIRED_PORTS - published
    assert 4200 in _published_ports(services["prefect-server"])
    assert {8786, 8787} <= _published_ports(services["dask-scheduler"])
    assert 9000 in _published_ports(services["minio"])


def test_prefect_server_environment(services):
    env = _env(services["prefect-server"])
    assert env["PREFECT_API_DATABASE_CONNECTION_URL"] == (
        "postgresql+asyncpg://prefect:prefect@postgres:5432/prefect")
    assert env["PREFECT_SERVER_API_HOST"] == "0.0.0.0"
    assert env["PREFECT_UI_API_URL"] == "http://localhost:4200/api"
    assert _command(services["prefect-server"])[:3] == ["prefect", "server", "start"]
    # the connection URL must match the postgres service's credentials
    pg = _env(services["postgres"])
    assert (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]) == (
        "prefect", "prefect", "prefect")


def test_worker_points_at_server(services):
    env = _env(services["prefect-worker"])
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    cmd = _command(services["prefect-worker"])
    assert cmd[:3] == ["prefect", "worker", "start"]
    assert cmd[cmd.index("--pool") + 1] == "prepflow-pool"
    assert cmd[cmd.index("--type") + 1] == "process"


@pytest.mark.parametrize("name", ["prefect-worker", "dask-scheduler", "dask-worker"])
def test_s3_environment(services, name):
    env = _env(services[name])
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env.get(key), f"{name}: {key} not set"
    assert env["S3_ENDPOINT_URL"] == "http://minio:9000"


def test_healthchecks(services):
    for name in ("postgres", "minio", "prefect-server"):
        hc = services[name].get("healthcheck")
        assert hc and hc.get("test"), f"{name} has no healthcheck"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "/api/health" in " ".join(services["prefect-server"]["healthcheck"]["test"])


def test_depends_on_conditions(services):
    dep = services["prefect-server"]["depends_on"]
    assert dep["postgres"]["condition"] == "service_healthy"
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        if isinstance(deps, list):
            deps = {d: {"condition": "service_started"} for d in deps}
        for target, cond in deps.items():
            assert target in services, f"{name} depends on unknown service {target}"
            if cond["condition"] == "service_healthy":
                assert services[target].get("healthcheck"), (
                    f"{name} waits for {target} to be healthy but it has no healthcheck")


def test_dask_worker_replicas_and_scheduler_address(services):
    assert services["dask-worker"]["deploy"]["replicas"] == 2
    cmd = _command(services["dask-worker"])
    assert cmd[:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert _command(services["dask-scheduler"])[:2] == ["dask", "scheduler"]


def test_minio_init_creates_bucket(services):
    init = services["minio-init"]
    assert init["image"].startswith("minio/mc")
    script = " ".join(init.get("entrypoint") or []) + " ".join(_command(init))
    assert re.search(r"mc mb\b.*\blocal/prepflow\b", script)
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"


def test_project_commands_exist_in_the_image(services):
    """The image installs the same distributions as the dev venv (pip install -c
    constraints.txt .), so the console scripts the commands call must exist here too."""
    scripts = {ep.name for ep in entry_points(group="console_scripts")}
    bindir = Path(sys.executable).parent
    for name in PROJECT_SERVICES:
        exe = _command(services[name])[0]
        assert exe in {"prefect", "dask"}, f"{name}: unexpected executable {exe}"
        assert exe in scripts, f"{exe} is not a console script of any installed package"
        assert (bindir / exe).exists(), f"{exe} not found in {bindir}"
    # healthchecks of project services call the image's python
    for name in PROJECT_SERVICES:
        hc = services[name].get("healthcheck")
        if hc:
            assert hc["test"][1] == "python"


def test_dask_cli_accepts_the_worker_options(services):
    from distributed.cli.dask_worker import main as dask_worker

    options = {opt for param in dask_worker.params for opt in param.opts}
    for arg in _command(services["dask-worker"])[3:]:
        if arg.startswith("--"):
            assert arg in options, f"dask worker has no option {arg}"


# --- infra/Dockerfile -------------------------------------------------------------------


def test_dockerfile():
    text = DOCKERFILE.read_text()
    instructions = [line.strip() for line in text.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    assert instructions[0] == "FROM python:3.11-slim"
    assert "WORKDIR /app" in instructions
    assert any(i.startswith("COPY . /app") or i == "COPY . ." for i in instructions)
    run = re.search(r"RUN pip install(.*?)(?:\n\S|\Z)", text, re.S).group(1)
    assert "-c constraints.txt" in run
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in run
    assert (ROOT / "constraints.txt").is_file()


# --- infra/prefect.yaml ------------------------------------------------------------------


def test_prefect_yaml_structure(prefect_yaml, services):
    assert prefect_yaml["name"] == "prepflow"
    pull = prefect_yaml["pull"]
    assert pull == [{"prefect.deployments.steps.set_working_directory": {"directory": "/app"}}]
    assert "WORKDIR /app" in DOCKERFILE.read_text()
    (dep,) = [d for d in prefect_yaml["deployments"] if d["name"] == "preprocess-nightly"]
    assert dep["entrypoint"] == "flows/preprocess.py:preprocess"
    worker_cmd = _command(services["prefect-worker"])
    assert dep["work_pool"]["name"] == worker_cmd[worker_cmd.index("--pool") + 1]
    params = dep["parameters"]
    assert set(params) <= FLOW_PARAMETERS
    assert params["config"] == "examples/titanic/config.yaml"
    assert params["dataset"] == "examples/titanic/titanic.csv"
    assert params["output"] == "s3://prepflow/artifacts"
    scheduler_port = _published_ports(services["dask-scheduler"]) & {8786}
    assert scheduler_port and params["dask_address"] == "tcp://dask-scheduler:8786"


def test_stage_cache_is_shared_by_the_flow_runs_and_the_dask_workers(prefect_yaml, compose, services):
    """Dask workers read the cached parts and write encoded ones by path: the deployment's cache_dir
    must be one volume mounted at that path in the Prefect worker and in every Dask worker."""
    (dep,) = prefect_yaml["deployments"]
    cache_dir = dep["parameters"]["cache_dir"]
    assert cache_dir.startswith("/"), cache_dir
    mounts = {}
    for name in ("prefect-worker", "dask-worker"):
        volumes = [v for v in services[name].get("volumes", []) if isinstance(v, str)]
        mounts[name] = {v.split(":")[0] for v in volumes if v.split(":")[1] == cache_dir}
    (volume,) = mounts["prefect-worker"]
    assert mounts["dask-worker"] == {volume}
    assert volume in compose["volumes"]
    assert f"mkdir -p {cache_dir}" in DOCKERFILE.read_text()


def test_prefect_yaml_matches_prefects_model(prefect_yaml):
    models = pytest.importorskip("prefect.cli.deploy._models")
    model = models.PrefectYamlModel.model_validate(prefect_yaml)
    (dep,) = model.deployments
    assert dep.work_pool.name == "prepflow-pool"
    for item in dep.schedules:
        assert isinstance(item, models.RawScheduleConfig)


def test_prefect_yaml_schedule(prefect_yaml):
    from cronsim import CronSim
    from prefect.client.schemas.schedules import CronSchedule

    (dep,) = prefect_yaml["deployments"]
    (sched,) = dep["schedules"]
    assert sched["cron"] == "0 2 * * *" and sched["timezone"] == "UTC"
    CronSchedule(cron=sched["cron"], timezone=sched["timezone"])
    nxt = next(CronSim(sched["cron"], datetime(2026, 1, 1, 3, tzinfo=timezone.utc)))
    assert nxt == datetime(2026, 1, 2, 2, tzinfo=timezone.utc)


def test_prefect_yaml_entrypoint_exists(prefect_yaml):
    (dep,) = prefect_yaml["deployments"]
    path, func = dep["entrypoint"].split(":")
    full = os.path.join(ROOT, path)
    assert os.path.exists(full), f"deployment entrypoint {path} does not exist (yet?)"
    tree = ast.parse(Path(full).read_text())
    defs = {n.name: n for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert func in defs, f"{path} defines no function {func}"
    fn = defs[func]
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    missing = set(dep["parameters"]) - names
    assert not missing or fn.args.kwarg, f"flow {func} has no parameters {missing}"


# --- infra/ci/github-data-gate.yml -----------------------------------------------------


def test_github_data_gate_workflow():
    wf = yaml.safe_load(DATA_GATE.read_text())
    triggers = wf.get("on", wf.get(True))  # PyYAML reads the bare key `on` as True
    assert triggers, "workflow has no triggers"
    assert wf["jobs"], "workflow has no jobs"
    runs = [step.get("run", "") for job in wf["jobs"].values() for step in job["steps"]]
    assert any("pip install" in r and "-c constraints.txt" in r for r in runs)
    assert any(re.search(r"prepflow validate \S+ --config \S+", r) for r in runs)
