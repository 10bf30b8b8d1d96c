"""deploy/kubernetes/: the manifests parse, agree with each other, with the image and with
docs/scale-out.md. Nothing here runs a Kubernetes cluster."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.docker import image_name
from openenv_gym.providers.kubernetes import service_urls, statefulset_urls

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
DOCS = (ROOT / "docs" / "scale-out.md").read_text()
DOCKERFILE = (ROOT / "servers" / "Dockerfile").read_text()


def load(name: str) -> dict[str, Any]:
    (doc,) = list(yaml.safe_load_all((DEPLOY / name).read_text()))
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def statefulset() -> dict[str, Any]:
    return load("statefulset.yaml")


@pytest.fixture(scope="module")
def service() -> dict[str, Any]:
    return load("service.yaml")


def container(statefulset: dict[str, Any]) -> dict[str, Any]:
    (only,) = statefulset["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env_of(statefulset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container(statefulset)["env"]}


def test_every_manifest_parses_and_is_documented() -> None:
    kinds = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        doc = load(path.name)
        assert {"apiVersion", "kind"} <= set(doc), path.name
        kinds[path.name] = doc["kind"]
        assert f"`{path.name}`" in DOCS, f"docs/scale-out.md does not list {path.name}"
    assert kinds == {
        "kustomization.yaml": "Kustomization",
        "networkpolicy.yaml": "NetworkPolicy",
        "secret.example.yaml": "Secret",
        "service.yaml": "Service",
        "statefulset.yaml": "StatefulSet",
        "trainer-job.example.yaml": "Job",
    }


def test_kustomization_applies_the_servers_but_no_secret() -> None:
    resources = load("kustomization.yaml")["resources"]
    assert sorted(resources) == ["service.yaml", "statefulset.yaml"]
    assert all((DEPLOY / name).is_file() for name in resources)
    assert "kubectl apply -k deploy/kubernetes" in DOCS


def test_headless_service_selects_the_pods_on_the_http_port(
    statefulset: dict[str, Any], service: dict[str, Any]
) -> None:
    spec = service["spec"]
    assert spec["clusterIP"] == "None"  # headless: per-pod DNS, no load balancer
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= pod_labels.items()
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (port,) = spec["ports"]
    (container_port,) = container(statefulset)["ports"]
    assert port["targetPort"] == container_port["name"] == "http"
    assert port["port"] == container_port["containerPort"] == 8000
    assert env_of(statefulset)["PORT"]["value"] == "8000"


def test_servers_run_the_image_non_root_with_limits(statefulset: dict[str, Any]) -> None:
    pod = statefulset["spec"]["template"]["spec"]
    server = container(statefulset)
    assert server["image"] == image_name("wordle")  # what `openenv-gym images build` tags
    uid = re.search(r"^USER (\d+):(\d+)$", DOCKERFILE, re.MULTILINE)
    assert uid is not None
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid.group(1))
    assert pod["securityContext"]["runAsGroup"] == int(uid.group(2))
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    hardened = server["securityContext"]
    assert hardened["allowPrivilegeEscalation"] is False
    assert hardened["readOnlyRootFilesystem"] is True
    assert hardened["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"]["medium"] == "Memory"  # the only writable dir
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(server["resources"][kind])
    assert statefulset["spec"]["replicas"] == 4  # what the docs' example lists


def test_the_image_reads_what_the_pods_set(statefulset: dict[str, Any]) -> None:
    env = env_of(statefulset)
    command = re.search(r"^CMD (.*)$", DOCKERFILE, re.MULTILINE)
    assert command is not None
    for name in ("PORT", "MAX_SESSIONS"):
        assert f"${name}" in command.group(1)
        assert name in env
    assert "--host 0.0.0.0" in command.group(1)  # reachable from other pods: a token is due


def test_the_token_comes_from_the_secret_and_guards_readiness(
    statefulset: dict[str, Any],
) -> None:
    secret = load("secret.example.yaml")
    ref = env_of(statefulset)["OPENENV_GYM_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"] == "openenv-gym-token"
    assert ref["key"] in secret["stringData"]
    assert f"kubectl create secret generic {ref['name']}" in DOCS
    assert f"key: {ref['key']}" in DOCS
    server = container(statefulset)
    probe = " ".join(server["readinessProbe"]["exec"]["command"])
    assert "/health" in probe
    assert 'os.environ["OPENENV_GYM_TOKEN"]' in probe
    assert server["livenessProbe"]["tcpSocket"]["port"] == "http"


def test_network_policy_guards_the_same_pods(statefulset: dict[str, Any]) -> None:
    policy = load("networkpolicy.yaml")
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert "openenv-gym/client" in rule["from"][0]["podSelector"]["matchLabels"]


def test_statefulset_urls_name_the_pods(
    statefulset: dict[str, Any], service: dict[str, Any]
) -> None:
    name = statefulset["metadata"]["name"]
    urls = statefulset_urls(name, statefulset["spec"]["replicas"])
    assert urls[0] == f"http://{name}-0.{service['metadata']['name']}:8000"
    assert urls[0] in DOCS
    assert len(urls) == 4
    assert statefulset_urls("s", 1, service="svc", port=9, scheme="https") == ["https://s-0.svc:9"]
    with pytest.raises(ConfigurationError):
        statefulset_urls("s", 0)


def test_service_urls_sort_and_dedupe_the_records(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.12", 8000)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00::2", 8000, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.9", 8000)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.12", 8000)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: records)
    assert service_urls("openenv-wordle") == [
        "http://10.0.0.9:8000",
        "http://10.0.0.12:8000",
        "http://[fd00::2]:8000",
    ]


def test_service_urls_of_a_real_name_and_of_none() -> None:
    assert service_urls("127.0.0.1", 8001) == ["http://127.0.0.1:8001"]
    with pytest.raises(ProviderError, match="cannot resolve"):
        service_urls("no-such-host.invalid")


def test_the_kustomization_overrides_the_statefulsets_image(statefulset: dict[str, Any]) -> None:
    """``images:`` names the image the StatefulSet runs, so a registry is set in one place."""
    (override,) = load("kustomization.yaml")["images"]
    name, _, tag = container(statefulset)["image"].rpartition(":")
    assert override["name"] == name
    assert {"newName", "newTag"} <= set(override)
    assert override["newTag"] == tag == image_name("wordle").rpartition(":")[2]
    assert "kustomize edit set image" in (DEPLOY / "kustomization.yaml").read_text()
    assert "`images:`" in DOCS


@pytest.fixture(scope="module")
def job() -> dict[str, Any]:
    return load("trainer-job.example.yaml")


def test_the_trainer_job_is_a_client_the_policy_lets_in(
    job: dict[str, Any], statefulset: dict[str, Any]
) -> None:
    pod = job["spec"]["template"]
    (rule,) = load("networkpolicy.yaml")["spec"]["ingress"]
    wanted = rule["from"][0]["podSelector"]["matchLabels"]
    assert wanted.items() <= pod["metadata"]["labels"].items()  # the client label
    (trainer,) = pod["spec"]["containers"]
    env = {entry["name"]: entry for entry in trainer["env"]}
    ref = env["OPENENV_GYM_TOKEN"]["valueFrom"]["secretKeyRef"]
    server_ref = env_of(statefulset)["OPENENV_GYM_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == server_ref  # the token the servers demand
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert trainer["securityContext"]["allowPrivilegeEscalation"] is False
    assert "trainer-job.example.yaml" not in load("kustomization.yaml")["resources"]


@pytest.mark.integration
def test_the_trainer_jobs_script_runs_against_servers(
    job: dict[str, Any], statefulset: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The Job's Python, as written, against two local Wordle servers standing in for the
    StatefulSet's pods (its DNS names pointed at them), with the token from the env."""
    import openenv_gym.providers.kubernetes as kubernetes
    from openenv_gym.providers import LocalProvider

    (trainer,) = job["spec"]["template"]["spec"]["containers"]
    assert trainer["command"][:2] == ["python3", "-c"]
    script = trainer["command"][2]
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "a-token-from-the-secret")
    provider = LocalProvider("wordle", num_servers=2)
    asked: list[tuple[str, int]] = []
    try:
        urls = provider.start()

        def pods(name: str, replicas: int, **options: Any) -> list[str]:
            asked.append((name, replicas))
            return urls

        monkeypatch.setattr(kubernetes, "statefulset_urls", pods)
        exec(compile(script, "trainer-job.example.yaml", "exec"), {"__name__": "__main__"})
    finally:
        provider.close()
    assert asked == [(statefulset["metadata"]["name"], statefulset["spec"]["replicas"])]
    assert capsys.readouterr().out.startswith("64 games on 2 servers, mean reward ")
