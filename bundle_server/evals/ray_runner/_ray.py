"""The one place Ray is imported and spoken to: importing it (or saying which extra to
install), connecting to a cluster, the node actor's class, and telling a lost node from a
failed trial. Nothing else of the package imports `ray`, so `bundle-evals --help`, a local run
and a usage error never pay for it (or need it).

Connecting: to the cluster at the address given (or RAY_ADDRESS); without one, to a Ray
instance started for the run on this machine alone (never to whatever `ray start` last left
running: a run goes where it is told). A cluster's address is checked when the runner is made,
before anything is built or written (`reachable`): its GCS must answer within
eval-cluster-connect-time, asked in a process of its own that is killed at the deadline, since
ray.init itself retries a wrong address for ever. Ray is kept quiet and on loopback where it
can be: no usage statistics unless the user's RAY_USAGE_STATS_ENABLED says otherwise, no web
dashboard for an instance started here (its per-node agents are Ray's own and cannot be turned
off in 2.60; they listen on the node's address, 127.0.0.1 here), no worker logs streamed into
the driver's stderr (which carries the run's NDJSON progress). A cluster at a loopback
address is joined as a node at 127.0.0.1: Ray would otherwise swap a loopback address for this
machine's network address, where such a cluster does not listen (`loopback_only`: a switch of
Ray's own, checked to exist and put back when the run leaves the cluster).
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bundle_contract._generated.errors import EvalClusterUnusable, EvalRunnerMissing
from bundle_contract._spec import get_spec

EXTRA = "bundle-devkit[ray]"  # pyproject.toml [project.optional-dependencies] ray


def import_ray() -> ModuleType:
    """The `ray` module, or EvalRunnerMissing naming the extra to install."""
    try:
        import ray
    except ImportError as error:
        raise EvalRunnerMissing(
            f"--runner ray needs Ray, which is not installed here ({error.msg}): install the"
            f" extra {EXTRA}, e.g. pip install '{EXTRA}'",
            {"extra": EXTRA},
        ) from None
    return ray


LOCAL = "local"  # Ray's word for an instance of its own, started by ray.init


def loopback(address: str) -> bool:
    """Whether `address` (host:port, or "local": an instance started here) is on loopback."""
    if address == LOCAL:
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve(address: str | None) -> str:
    """The address to join: `address`, else RAY_ADDRESS, else "local"; a cluster's checked
    to answer (`reachable`), so that a wrong one is refused before anything starts."""
    address = address or os.environ.get("RAY_ADDRESS") or LOCAL
    if address != LOCAL:
        reachable(address)
    return address


def connect(ray: ModuleType, address: str) -> Callable[[], None] | None:
    """Join the cluster at `address` (`resolve`d; "local": a Ray instance started here for
    the run); what leaves it again (ray.shutdown, and Ray's settings put back as they were),
    or None when this process was connected already: its caller's connection, used and left
    as it is, which must be to the cluster asked for (EvalClusterUnusable otherwise)."""
    if ray.is_initialized():
        connected = ray.get_runtime_context().gcs_address
        if address != LOCAL and not same_address(connected, address):
            raise EvalClusterUnusable(
                f"this process is connected to the Ray cluster at {connected}, not {address}:"
                " disconnect first (ray.shutdown()) or give its address",
                {"address": address},
            )
        return None
    # A user's own RAY_USAGE_STATS_ENABLED wins; unset, no usage statistics are sent.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    restore = loopback_only(ray) if loopback(address) else (lambda: None)
    if loopback(address):
        options["_node_ip_address"] = "127.0.0.1"
    if address == LOCAL:
        options["include_dashboard"] = False
    # Ray's core worker takes SIGTERM for its own (it dies at once); a handler the caller
    # set (bundle-evals: SIGTERM ends a run as ^C does, its nodes closed) is set again.
    kept = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        restore()
        where = "started here" if address == LOCAL else f"at {address}"
        raise EvalClusterUnusable(
            f"cannot reach the Ray cluster {where}: {one_line(error)}", {"address": address}
        ) from None
    except BaseException:
        restore()
        raise
    if threading.current_thread() is threading.main_thread():
        for number, handler in kept.items():
            if callable(handler):
                signal.signal(number, handler)

    def disconnect() -> None:
        try:
            ray.shutdown()
        finally:
            restore()

    return disconnect


# What `loopback_only` sets: Ray's switch between a cluster's network address and loopback.
SWITCH = ("ray._private.ray_constants", "ENABLE_RAY_CLUSTER")


def loopback_only(ray: ModuleType) -> Callable[[], None]:
    """Have Ray take 127.0.0.1 for this node's address (it reads ray_constants'
    ENABLE_RAY_CLUSTER when it resolves a loopback address: see the module docstring); what
    puts the setting back. EvalClusterUnusable naming Ray's version when this Ray has no such
    setting (a Ray this runner was not made for: the setting would silently do nothing)."""
    module_name, attribute = SWITCH
    module = importlib.import_module(module_name)
    if not hasattr(module, attribute):
        raise EvalClusterUnusable(
            f"Ray {getattr(ray, '__version__', '?')} has no {module_name}.{attribute}, which"
            " keeps a run on loopback on 127.0.0.1: use the Ray version bundle-devkit[ray]"
            " pins",
            {"address": LOCAL},
        )
    before = getattr(module, attribute)
    setattr(module, attribute, False)
    return lambda: setattr(module, attribute, before)


def same_address(one: str, other: str) -> bool:
    """Whether two HOST:PORT addresses name the same place (a loopback host is any other)."""
    (host_a, _, port_a), (host_b, _, port_b) = one.rpartition(":"), other.rpartition(":")
    if port_a != port_b:
        return False
    if loopback(one) and loopback(other):
        return True
    try:
        return socket.gethostbyname(host_a.strip("[]")) == socket.gethostbyname(host_b.strip("[]"))
    except OSError:
        return host_a == host_b


def reachable(address: str) -> None:
    """EvalClusterUnusable unless a Ray cluster's GCS answers at `address` (host:port) within
    eval-cluster-connect-time: ray.init retries for ever an address where nothing listens, or
    where something that is not Ray does (writing Ray's warnings onto stderr meanwhile). The
    GCS is asked in a process of its own, killed at the deadline, its output kept apart."""
    if "://" in address:
        raise EvalClusterUnusable(
            f"{address}: give the cluster's HOST:PORT (Ray Client addresses are not used: run"
            " bundle-evals on a node of the cluster)",
            {"address": address},
        )
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise EvalClusterUnusable(f"{address}: not a HOST:PORT address", {"address": address})
    seconds = get_spec().limit("eval-cluster-connect-time")["maximum"] / 1000
    deadline = time.monotonic() + seconds
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as error:
        raise EvalClusterUnusable(
            f"cannot reach the Ray cluster at {address}: {error.strerror or error}",
            {"address": address},
        ) from None
    left = max(deadline - time.monotonic(), 0.1)
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE, address, str(int(left * 1000))],
            capture_output=True,
            text=True,
            timeout=left,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise EvalClusterUnusable(
            f"{address} does not answer as a Ray cluster (its GCS) within {seconds:g} s:"
            " is it the head node's GCS port (6379 by default)?",
            {"address": address},
        ) from None
    if probe.returncode != 0:
        said = [line for line in probe.stderr.splitlines() if line.strip()]
        raise EvalClusterUnusable(
            f"{address} does not answer as a Ray cluster (its GCS):"
            f" {one_line(said[-1] if said else f'exit {probe.returncode}')}",
            {"address": address},
        )


# Run by `reachable` in a process of its own: the GCS at argv[1] asked for its cluster id.
_PROBE = """
import sys
from ray._raylet import InnerGcsClient
InnerGcsClient.standalone(sys.argv[1], None, int(sys.argv[2]))
"""


def one_line(error: BaseException | str) -> str:
    """An error in one line of at most 500 characters: its first, without the traceback Ray
    appends to its own."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__ if isinstance(error, BaseException) else ""
    return " ".join(lines[0].split())[:500]


def actor_class(ray: ModuleType) -> Any:
    """The node actor: `node.EvalNode` as a Ray actor that is never restarted (a lost node's
    trials run again elsewhere, chosen by the driver) and whose tasks are never retried."""
    from bundle_server.evals.ray_runner.node import EvalNode

    return ray.remote(max_restarts=0, max_task_retries=0)(EvalNode)


def lost_errors(ray: ModuleType) -> tuple[type[BaseException], ...]:
    """What a call to an actor raises when its worker or node is gone, not its own failure."""
    exceptions = ray.exceptions
    return (
        exceptions.RayActorError,  # ActorDiedError, ActorUnavailableError are of it
        exceptions.WorkerCrashedError,
        exceptions.NodeDiedError,
        exceptions.OwnerDiedError,
        exceptions.ObjectLostError,
    )


def scheduling(node_id: str) -> Any:
    """Place an actor on exactly this node (a trial's node is the driver's choice)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id, soft=False)
