"""Cloud Run's probes on busy instances: threads to spare and timeouts that allow for load."""

from __future__ import annotations

from tests.infra import tfconfig
from tests.infra.tfconfig import Terraform, block

#: Services that run gunicorn with threads for their request concurrency.
SERVICES = ("intake", "worker", "notification")


def _container(module: Terraform) -> dict[str, object]:
    template = block(module.resource("google_cloud_run_v2_service", "main"), "template")
    return template["containers"][0]  # type: ignore[index,no-any-return]


def _plain_env(module: Terraform) -> dict[str, str]:
    dynamic = _container(module)["dynamic"]
    for_each = next(d["env"]["for_each"] for d in dynamic if "env" in d)  # type: ignore[attr-defined]
    return tfconfig.literal_map(for_each)


def test_each_service_is_told_its_request_concurrency() -> None:
    # Every service is one call of modules/run_service with its own sizing.
    tf = tfconfig.load()
    module = tfconfig.run_service_module()
    main = module.resource("google_cloud_run_v2_service", "main")
    assert block(main, "template")["max_instance_request_concurrency"] == (  # type: ignore[index]
        "${var.sizing.concurrency}"
    )
    env = _plain_env(module)
    # The image adds spare threads to it (shared/http/gunicorn_conf.py); a bare
    # thread count equal to the concurrency left no thread for the probes.
    assert env["CONCURRENCY"] == "${tostring(var.sizing.concurrency)}"
    assert "THREADS" not in env
    for service in SERVICES:
        call = tfconfig.service(tf, service)
        assert call["sizing"] == f"${{var.{service}}}", service
        assert "CONCURRENCY" not in tfconfig.literal_map(call["env"]), service
        assert "THREADS" not in call["env"], service


def test_probes_allow_for_a_busy_instance() -> None:
    module = tfconfig.run_service_module()
    container = _container(module)
    for name in ("startup_probe", "liveness_probe"):
        probe = block(container, name)
        timeout = int(probe["timeout_seconds"])  # type: ignore[index]
        period = int(probe["period_seconds"])  # type: ignore[index]
        failures = int(probe["failure_threshold"])  # type: ignore[index]
        # Cloud Run's defaults (1 s, every 10 s, 3 failures) restart an instance
        # whose CPU is busy grading after half a minute of slow answers.
        assert timeout >= 5 and timeout <= period, name
        assert period * failures >= 60, name
        if name == "startup_probe":
            # Cloud Run refuses a startup probe longer than 240 s in all.
            assert period * failures <= 240
