"""The docker-compose stack and infra/ files, checked without a Docker engine (none runs here).

Not a restatement of the file: ``docker-compose.yml`` is validated against the Compose Specification
(``tests/data/compose-spec.json``), then checked for what breaks the stack when it is wrong: the commands
its services run exist in the image (the image installs this project with ``constraints.txt``, as the dev
virtualenv does) and accept their options; every address a service is given names a service of the
stack and a port that service listens on; credentials agree on both ends; the UI is told an API address
a browser can reach; the stage cache is one volume at the deployment's ``cache_dir`` everywhere; and the
stack agrees with what ``tests/integration/test_native_stack.py`` starts natively (pool, deployment,
S3 settings). The services themselves run in that integration test.

It is a development stack (issue 48): every published port is bound to 127.0.0.1, and every credential
comes from ``.env`` through compose's ``${VAR:?message}``, so the stack refuses to start without it;
``.env.example`` documents each and holds none. The file is read with compose's interpolation, the
environment being what ``.env.example`` asks for (``STACK_ENV``).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "tests" / "data" / "compose-spec.json"
DOCKERFILE = ROOT / "infra" / "Dockerfile"
PREFECT_YAML = ROOT / "infra" / "prefect.yaml"
DATA_GATE = ROOT / "infra" / "ci" / "github-data-gate.yml"
ENV_EXAMPLE = ROOT / ".env.example"
BIN = Path(sys.executable).parent

SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "2>&1"}
# What each service listens on inside the stack (the images' own defaults, or the command's options).
LISTENS = {"postgres": {5432}, "prefect-server": {4200}, "dask-scheduler": {8786, 8787}, "minio": {9000, 9001}}


# Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}; $$ is a $.
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
# An environment key that holds a credential.
CREDENTIAL_KEY = re.compile(r"PASSWORD|SECRET|ACCESS_KEY")
LOOPBACK = "127.0.0.1"


class MissingVariable(Exception):
    """A ``${VAR:?...}`` (or ``${VAR?...}``) whose variable is not set: ``docker compose`` refuses to start."""


def env_example() -> dict[str, str]:
    """``.env.example`` as compose reads a ``.env``: ``KEY=VALUE`` lines, ``#`` comments."""
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


# What a user's .env gives once every value .env.example asks for is filled in.
STACK_ENV = {key: f"test-{key.lower().replace('_', '-')}" for key in env_example()}


def interpolate(value: str, env: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        name, op, arg = match.groups()
        got = env.get(name)
        unset = got is None or (got == "" and op and op.startswith(":"))
        if op in (":?", "?"):
            if unset:
                raise MissingVariable(f"{name}: {arg}")
            return got
        if op in (":-", "-"):
            return arg if unset else got
        return got or ""

    return VARIABLE.sub(one, value.replace("$$", "\0")).replace("\0", "$")


def interpolated(node, env: dict[str, str]):
    """Every string of the parsed file interpolated, as compose does (its comments are not)."""
    if isinstance(node, dict):
        return {key: interpolated(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolated(value, env) for value in node]
    return interpolate(node, env) if isinstance(node, str) else node


def strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in strings(value)]
    return [node] if isinstance(node, str) else []


@pytest.fixture(scope="module")
def raw() -> dict:
    """The file as written, before interpolation."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def compose(raw) -> dict:
    return interpolated(raw, STACK_ENV)


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture(scope="module")
def deployment() -> dict:
    (dep,) = yaml.safe_load(PREFECT_YAML.read_text())["deployments"]
    return dep


def _env(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: str(v) for k, v in env.items()}


def _command(service: dict) -> list[str]:
    cmd = service.get("command")
    return cmd.split() if isinstance(cmd, str) else list(cmd or [])


def _published(service: dict) -> dict[int, int]:
    """{published port: container port}."""
    out = {}
    for port in service.get("ports", []):
        parts = str(port).split("/")[0].split(":")
        out[int(parts[-2] if len(parts) > 1 else parts[-1])] = int(parts[-1])
    return out


def _option(cmd: list[str], name: str, default: str | None = None) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else default


def _address(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return parsed.hostname, parsed.port


# --- the file against the Compose Specification ---------------------------------------------------------

def test_compose_file_is_valid_compose(compose, validator):
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("path,value", [
    (("services", "postgres", "healthcheck", "intervall"), "5s"),  # a misspelt key
    (("services", "prefect-server", "depends_on", "postgres", "condition"), "healthy"),  # not an enum value
    (("services", "minio", "restart"), ["no"]),  # wrong type
])
def test_the_validator_rejects_broken_files(compose, validator, path, value):
    broken = copy.deepcopy(compose)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert list(validator.iter_errors(broken))


# --- commands: they exist in the image and accept their options ----------------------------------------

def test_project_services_run_one_image_built_from_the_dockerfile(services):
    built = {name: svc for name, svc in services.items() if "build" in svc}
    assert built
    assert len({(svc.get("image"), json.dumps(svc["build"], sort_keys=True)) for svc in built.values()}) == 1
    build = next(iter(built.values()))["build"]
    assert (ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
    # every other service runs a public image, pinned or not, never a missing build
    assert all(svc.get("image") for svc in services.values())


def _project_commands(services) -> dict[str, list[str]]:
    cmds = {name: _command(svc) for name, svc in services.items() if "build" in svc}
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test") or []
        if "build" in svc and test and test[0] == "CMD":
            cmds[f"{name} healthcheck"] = test[1:]
    return cmds


def test_project_commands_are_installed_console_scripts(services):
    """The image installs this project (``pip install -c constraints.txt .``): what the dev virtualenv
    has, the image has. A command from a package that is not a dependency would fail at start."""
    for name, cmd in _project_commands(services).items():
        exe = cmd[0]
        assert exe == "python" or (BIN / exe).is_file(), f"{name}: {exe} is not installed with the project"


@pytest.mark.integration  # a `prefect` process each (~5-15 s of imports)
@pytest.mark.parametrize("service", ["prefect-server", "prefect-worker"])
def test_prefect_commands_accept_their_options(services, service):
    cmd = _command(services[service])
    assert cmd[0] == "prefect"
    words = [w for w in cmd[1:] if not w.startswith("-")][:2]  # e.g. ["server", "start"]
    proc = subprocess.run([str(BIN / "prefect"), *words, "--help"], capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                               "HOME": str(ROOT / ".venv")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    for option in (w for w in cmd if w.startswith("--")):
        assert re.search(rf"{re.escape(option)}\b", proc.stdout), f"{service}: prefect {' '.join(words)} has no {option}"


def test_dask_commands_accept_their_options(services):
    from distributed.cli.dask_scheduler import main as dask_scheduler
    from distributed.cli.dask_worker import main as dask_worker

    for service, main in (("dask-worker", dask_worker), ("dask-scheduler", dask_scheduler)):
        options = {opt for param in main.params for opt in param.opts}
        for arg in _command(services[service])[2:]:
            if arg.startswith("--"):
                assert arg in options, f"{service}: dask has no option {arg}"


def test_healthchecks_use_what_the_image_has(services):
    """python:3.11-slim has no curl or wget: a project service's healthcheck must use python."""
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test") or []
        if "build" in svc and test:
            assert test[0] == "CMD" and test[1] == "python", f"{name}: {test}"
            code = test[test.index("-c") + 1]
            compile(code, f"{name} healthcheck", "exec")


# --- addresses, ports and credentials agree ------------------------------------------------------------

def _addresses(services) -> list[tuple[str, str, str]]:
    """(service, where, url) for every URL-like value in an environment or a command."""
    found = []
    for name, svc in services.items():
        for key, value in _env(svc).items():
            if "://" in value:
                found.append((name, key, value))
        for word in _command(svc):
            if re.match(r"^(tcp|http|https)://", word):
                found.append((name, "command", word))
    return found


def test_every_address_names_a_service_and_a_port_it_listens_on(services):
    addresses = _addresses(services)
    assert addresses
    for name, where, url in addresses:
        host, port = _address(url)
        if host == "localhost":  # an address for the user's browser: a published port
            published = {p for svc in services.values() for p in _published(svc)}
            assert port in published, f"{name} {where}: {url} is not a published port"
            continue
        assert host in services, f"{name} {where}: {url} names no service"
        assert port in LISTENS.get(host, set()), f"{name} {where}: {host} does not listen on {port}"


def test_published_ports_reach_what_the_services_listen_on(services):
    for name, svc in services.items():
        for published, target in _published(svc).items():
            assert target in LISTENS.get(name, set()), f"{name}: port {published} maps to {target}, nothing listens"


def test_the_ui_is_told_an_api_its_browser_reaches(services):
    """The UI's JavaScript calls PREFECT_UI_API_URL from the user's browser: it must be the server's published
    port on localhost (the container's own address would be unreachable from the host)."""
    env = _env(services["prefect-server"])
    host, port = _address(env["PREFECT_UI_API_URL"])
    assert host == "localhost" and urlparse(env["PREFECT_UI_API_URL"]).path == "/api"
    assert _published(services["prefect-server"]).get(port) == 4200


def test_database_credentials_match_postgres(services):
    url = urlparse(_env(services["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"])
    pg = _env(services["postgres"])
    assert url.scheme == "postgresql+asyncpg"
    assert (url.username, url.password, url.path.lstrip("/")) == (
        pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])


def test_s3_credentials_match_minio(services):
    minio = _env(services["minio"])
    for name in ("prefect-worker", "dask-worker", "dask-scheduler"):
        env = _env(services[name])
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
            minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"]), name


# --- a development stack: loopback only, no credential without .env -----------------------------------

def _host_ips(service: dict) -> list[str | None]:
    """The host address each published port is bound to (None: every interface)."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):  # long syntax
            out.append(port.get("host_ip"))
        else:
            parts = str(port).split("/")[0].split(":")
            out.append(":".join(parts[:-2]) or None if len(parts) > 2 else None)
    return out


def test_every_published_port_is_bound_to_loopback(services):
    published = {name: _host_ips(svc) for name, svc in services.items() if svc.get("ports")}
    assert published
    for name, ips in published.items():
        assert ips and all(ip == LOOPBACK for ip in ips), f"{name}: ports {services[name]['ports']} not on {LOOPBACK}"


def test_services_listen_on_every_interface_only_inside_the_stack(services):
    """A server in a container must listen on 0.0.0.0 to be reached from the other containers and through its
    published port; the host sees it on loopback only."""
    for name, svc in services.items():
        cmd, env = _command(svc), _env(svc)
        if "0.0.0.0" in cmd or "0.0.0.0" in env.values():
            assert _published(svc) and set(_host_ips(svc)) == {LOOPBACK}, name


def _variables(raw: dict) -> list[tuple[str, str, str]]:
    return [found for value in strings(raw) for found in VARIABLE.findall(value)]


def _required(raw: dict) -> set[str]:
    return {name for name, op, _arg in _variables(raw) if op in (":?", "?")}


def test_the_stack_refuses_to_start_without_its_credentials(raw):
    assert _required(raw) == set(STACK_ENV)
    for name in STACK_ENV:  # each one missing, or empty, stops compose before any container starts
        for env in ({k: v for k, v in STACK_ENV.items() if k != name}, {**STACK_ENV, name: ""}):
            with pytest.raises(MissingVariable, match=name):
                interpolated(raw, env)
    used = {name for name, _op, _arg in _variables(raw)}
    defaults = {name for name, op, _arg in _variables(raw) if op in (":-", "-")}
    assert not defaults & set(STACK_ENV), f"a credential with a working default: {defaults & set(STACK_ENV)}"
    assert used == set(STACK_ENV), used - set(STACK_ENV)


def test_no_credential_is_written_in_the_compose_file(raw):
    secret = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]*\}")
    found = 0
    for name, svc in raw["services"].items():
        for key, value in _env(svc).items():
            if CREDENTIAL_KEY.search(key):
                found += 1
                assert secret.fullmatch(value), f"{name}: {key} is {value!r}, expected ${{VAR:?...}} from .env"
            if "://" in value and "@" in value:  # a URL with a user and password
                userinfo = value.split("://", 1)[1].rsplit("@", 1)[0]
                assert ":" in userinfo and secret.fullmatch(userinfo.split(":", 1)[1]), f"{name}: {key}: {value!r}"
                found += 1
    assert found >= 4  # postgres, the server's database URL, MinIO's user and password


def test_env_example_documents_every_credential_and_holds_none(raw):
    example = env_example()
    assert example and set(example) == _required(raw)
    assert all(value == "" for value in example.values()), example  # nothing that would start the stack
    for key in example:
        # a comment above it (or above the group of variables it belongs to)
        assert re.search(rf"#[^\n]*\n(?:(?:#[^\n]*|[A-Z_]+=)\n)*{key}=", ENV_EXAMPLE.read_text()), key
    assert not (ROOT / ".env").exists() or subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", ".env"]).returncode == 0
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    assert ".env" in (ROOT / "infra" / "Dockerfile.dockerignore").read_text().split()  # never in the image


def test_depends_on_targets_exist_and_are_healthy_when_waited_for(services):
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        deps = {d: {"condition": "service_started"} for d in deps} if isinstance(deps, list) else deps
        for target, cond in deps.items():
            assert target in services, f"{name} depends on unknown {target}"
            if cond["condition"] == "service_healthy":
                assert services[target].get("healthcheck"), f"{name} waits for {target}'s health, it has none"


# --- the deployment, the stack and the native test agree -----------------------------------------------

@pytest.mark.integration  # imports Prefect's deploy CLI (~10-18 s)
def test_prefect_yaml_is_valid_for_prefect_deploy():
    from prefect.cli.deploy._models import PrefectYamlModel

    PrefectYamlModel.model_validate(yaml.safe_load(PREFECT_YAML.read_text()))


def test_the_deployment_runs_on_this_stack(services, deployment):
    worker = _command(services["prefect-worker"])
    assert deployment["work_pool"]["name"] == _option(worker, "--pool")
    params = deployment["parameters"]
    assert params["dask_address"] in [w for w in _command(services["dask-worker"]) if w.startswith("tcp://")]
    bucket = urlparse(params["output"]).netloc
    init = " ".join(services["minio-init"].get("entrypoint") or []) + " ".join(_command(services["minio-init"]))
    assert re.search(rf"mc mb\b.*\blocal/{re.escape(bucket)}\b", init), f"bucket {bucket} is never created"
    for key in ("config", "dataset"):  # relative to the pull step's directory, the image's WORKDIR (= ROOT)
        assert (ROOT / params[key]).is_file(), params[key]
    (step,) = yaml.safe_load(PREFECT_YAML.read_text())["pull"]
    assert f"WORKDIR {step['prefect.deployments.steps.set_working_directory']['directory']}" in DOCKERFILE.read_text()


def test_the_stage_cache_is_one_volume_at_cache_dir(compose, services, deployment):
    cache_dir = deployment["parameters"]["cache_dir"]
    mounts = {}
    for name in ("prefect-worker", "dask-worker"):
        mounts[name] = {v.split(":")[0] for v in services[name].get("volumes", [])
                        if isinstance(v, str) and v.split(":")[1] == cache_dir}
    assert mounts["prefect-worker"] and mounts["prefect-worker"] == mounts["dask-worker"], mounts
    assert mounts["prefect-worker"] <= set(compose["volumes"])
    assert f"mkdir -p {cache_dir}" in DOCKERFILE.read_text()  # owned by the image's user


def test_the_native_stack_test_starts_the_same_stack(services, deployment):
    from tests.integration import test_native_stack as native

    worker_env = _env(services["prefect-worker"])
    assert native.POOL == _option(_command(services["prefect-worker"]), "--pool")
    assert native.DEPLOYMENT == f"preprocess/{deployment['name']}"
    assert native.BUCKET == urlparse(deployment["parameters"]["output"]).netloc
    assert set(native.S3_KEYS) | {"S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} <= set(worker_env)
    assert len([n for n in services if n.startswith("dask-worker")]) == 1
    assert services["dask-worker"]["deploy"]["replicas"] == 2  # the native test starts 2 workers too
    assert _option(_command(services["prefect-worker"]), "--type") == "process"


def test_the_ci_data_gate_calls_real_commands():
    wf = yaml.safe_load(DATA_GATE.read_text())
    runs = [step.get("run", "") for job in wf["jobs"].values() for step in job["steps"]]
    gate = [r for r in runs if "prepflow validate" in r]
    assert gate and any("-c constraints.txt" in r for r in runs)
    from flows.cli import build_parser

    for line in (ln for r in gate for ln in r.splitlines() if ln.strip().startswith("prepflow validate")):
        words = shlex.split(line.split("prepflow validate", 1)[1])
        args = list(itertools.takewhile(lambda w: w not in SHELL_OPERATORS, words))
        build_parser().parse_args(["validate", *args])  # argparse exits (SystemExit) on a wrong option
    assert shutil.which("prepflow", path=str(BIN))
