"""Shared fixtures: real Apache Kafka clusters (KRaft, started by localkafka) for integration tests.

Each xdist worker starts up to four single-node clusters (aliases A-D, with Kafka's
StandardAuthorizer) the first time a test asks for them and stops them when the session ends:

- `shared_clusters`: A, B and C as they are, for tests that only create uniquely named topics
  and groups;
- `kafka_clusters(n)`: the first n of them emptied first (every topic, consumer group and ACL
  of earlier tests deleted), for tests that use fixed names such as `heartbeats` or
  `A.checkpoints.internal`; a cluster a test stopped is started again on its data dir;
- `local_kafka(...)`: a cluster of the test's own, started fresh and stopped after it, for
  tests that restart, kill, reconfigure or secure brokers;
- `unverified_clusters`: A and B of the module's own, B taking forged transactional batches
  (UNVERIFIED), emptied for each test, for the tests of open and hanging transactions.

Set MIRRORFLOW_TEST_BOOTSTRAP_A, _B and _C to run against clusters of your own instead: only
the tests on `shared_clusters` run then (nothing is ever deleted from your clusters); tests that
need emptied or local clusters are deselected.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from xdist.scheduler import LoadGroupScheduling

from localkafka import LocalKafka, Security
from localkafka.runtime import JVM_OPTS_ENV
from localkafka.settings import QUICK_CLUSTER
from tests import spark_cds
from tests.client_leaks import leaked_since, running_clients
from tests.integration.wire import list_transactions

# Airflow writes its home (config, SQLite DB, logs) on import; keep it out of the user's ~/airflow,
# in a directory of this test process that goes when the process does.
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="mirrorflow-test-airflow-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

# The JVMs the suite starts (brokers, MM2, Spark drivers) live for seconds to minutes, where the
# C2 compiler costs more CPU than it gives back: C1 only cut the CPU of a broker-heavy subset of the
# suite by 40% and a Spark job's by a third (docs/development/tests.md). Only the JIT level
# changes; every Kafka setting is the test's own, and a user's environment value wins.
os.environ.setdefault(JVM_OPTS_ENV, "-XX:TieredStopAtLevel=1")
# Spark's drivers also map Spark's classes from the archive `make test` records once (tests/spark_cds.py):
# a driver's start-up is mostly class loading.
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"-XX:TieredStopAtLevel=1 {spark_cds.jvm_options()}".strip())

ALIASES = ("A", "B", "C", "D")
# QUICK_CLUSTER, and the controller's no-op metadata record every 5 s instead of every 0.5 s
# (metadata.max.idle.interval.ms): an idle broker then costs 1.3 CPU-seconds a minute, not 1.9, and
# a worker keeps four of them for the session.
TEST_BROKER_OVERRIDES = {**QUICK_CLUSTER, "metadata.max.idle.interval.ms": 5000}
# The worker clusters run Kafka's StandardAuthorizer, as production clusters do, so ACL sync
# meets a real authorizer; their PLAINTEXT listener is a super user (see localkafka.settings).
WITH_AUTHORIZER = Security(authorizer=True)


@dataclasses.dataclass
class Cluster:
    alias: str
    bootstrap: str
    kafka: LocalKafka | None = None

    def client_config(self, **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap, **extra}


class OnDemandCluster(Cluster):
    """A worker cluster started when a test first reads its address or its LocalKafka: most tests
    on `shared_clusters` use two of the three, and a third kept idle for the session on every
    worker costs a broker's idle CPU all along (tests.md, "Where the suite's CPU goes")."""

    def __init__(self, pool: WorkerClusters, alias: str) -> None:  # not the dataclass's
        self.alias = alias
        self._pool = pool
        self._started: Cluster | None = None

    def _cluster(self) -> Cluster:
        if self._started is None:
            (self._started,) = self._pool.get(self.alias)
        return self._started

    @property
    def started(self) -> bool:
        return self._started is not None

    @property  # type: ignore[override]
    def bootstrap(self) -> str:
        return self._cluster().bootstrap

    @property  # type: ignore[override]
    def kafka(self) -> LocalKafka | None:
        return self._cluster().kafka

    def __repr__(self) -> str:  # a failed test's report does not start it
        return (
            repr(self._started)
            if self._started is not None
            else f"Cluster(alias={self.alias!r}, not started)"
        )


def real_cluster_bootstraps() -> dict[str, str]:
    return {
        alias: os.environ[f"MIRRORFLOW_TEST_BOOTSTRAP_{alias}"]
        for alias in ALIASES
        if os.environ.get(f"MIRRORFLOW_TEST_BOOTSTRAP_{alias}")
    }


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "local_kafka: needs clusters this run starts (restarts, broker settings, log dirs)"
    )


LOCAL_ONLY_FIXTURES = {"kafka_clusters", "local_kafka", "unverified_clusters"}


# The order modules are handed to workers in (each module's tests stay together and in their
# order). In path order the end-to-end tests ran first, all together, and kept both cores busy
# (Airflow, chromium, Spark) for the suite's first 12 minutes, while the fault and integration
# tests that followed spend much of their time waiting on brokers, transaction timeouts and
# restarts, which left a fifth of the cores idle for the rest of the run (sampled every 5 s,
# 2026-11-30). Taking a module from each of the three kinds in turn runs the waiting beside the
# busy; the unit tests, short and many, come last and fill the workers that end first.
ORDER_KINDS = (("e2e",), ("reliability", "chaos"), ("integration", "mm2", "localkafka"))
# Within its kind, a module of one of the longest tests goes first: in path order the single-node
# target crash with Kafka's defaults (160-230 s) started in the suite's last minutes and ended it.
LONG_MODULES = frozenset(
    {
        "tests/reliability/test_target_crash.py",
        "tests/reliability/test_kill_nine.py",
        "tests/chaos/test_fault_schedule.py",
    }
)


def _interleaved(items: list[pytest.Item]) -> list[pytest.Item]:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def kind(path: str) -> int:
        folder = path.split("/")[1] if path.startswith("tests/") else ""
        return next((i for i, names in enumerate(ORDER_KINDS) if folder in names), len(ORDER_KINDS))

    first = [path for path in modules if path in ONE_WORKER_MODULES]  # the longest units of work
    queues: list[list[str]] = [[] for _ in range(len(ORDER_KINDS) + 1)]
    for path in sorted(modules, key=lambda path: path not in LONG_MODULES):  # a stable sort
        if path not in ONE_WORKER_MODULES:
            queues[kind(path)].append(path)
    turns = [path for group in itertools.zip_longest(*queues[:-1]) for path in group if path is not None]
    return [item for path in first + turns + queues[-1] for item in modules[path]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = _interleaved(items)
    if not real_cluster_bootstraps():
        return
    keep, deselected = [], []
    for item in items:
        local = item.get_closest_marker("local_kafka") or LOCAL_ONLY_FIXTURES & set(
            getattr(item, "fixturenames", ())
        )
        (deselected if local else keep).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = keep


OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


def end_open_transactions(bootstrap: str, timeout: float = 30.0) -> None:
    """End every transaction the cluster still has open (a run an earlier test killed or froze
    left it), before its topics go. Its coordinator would otherwise end it later into whatever
    partitions then carry those names: an abort marker at the start of a topic a later test
    created under the same name shifted that test's offsets by one."""
    ongoing = [t for t, state in list_transactions(bootstrap, ("Ongoing",)).items() if state == "Ongoing"]
    for transactional_id in ongoing:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 3}
        )
        try:
            producer.init_transactions(timeout)  # fences the old producer: its transaction is aborted
        finally:
            producer.flush(0)
            del producer
    deadline = time.monotonic() + timeout
    while list_transactions(bootstrap, OPEN_STATES):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"transactions on {bootstrap} stayed open: {list_transactions(bootstrap, OPEN_STATES)}"
            )
        time.sleep(0.1)


def empty_cluster(bootstrap: str, timeout: float = 30.0) -> None:
    """End open transactions, delete every topic (but Kafka's own), consumer group and ACL, and
    wait until they are gone."""
    end_open_transactions(bootstrap, timeout)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    topics = [t for t in admin.list_topics(timeout=timeout).topics if not t.startswith("__")]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=timeout).values():
            try:
                future.result(timeout)
            except KafkaException as exc:
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise
    groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=timeout).result(timeout).valid]
    if groups:
        for future in admin.delete_consumer_groups(groups, request_timeout=timeout).values():
            # A group with live members (a consumer a test left open) expires on its own.
            with contextlib.suppress(KafkaException):
                future.result(timeout)
    any_acl = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    try:
        admin.delete_acls([any_acl], request_timeout=timeout)[any_acl].result(timeout)
    except KafkaException as exc:
        if "SECURITY_DISABLED" not in str(exc):
            raise
    deadline = time.monotonic() + timeout
    while any(not t.startswith("__") for t in admin.list_topics(timeout=timeout).topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics of earlier tests are still listed on {bootstrap}")
        time.sleep(0.05)


class WorkerClusters:
    """This worker's clusters A-D, started on first use and kept for the session."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.started: dict[str, LocalKafka] = {}

    def get(self, *aliases: str) -> list[Cluster]:
        """The clusters named, launched side by side where they are not running yet."""
        for alias in aliases:
            kafka = self.started.get(alias)
            if kafka is not None and not all(node.running for node in kafka.nodes):
                # A test stopped or killed it: a new cluster replaces it. Restarted, it would
                # replay its metadata log, and Kafka 4.4 then keeps the configs of topics deleted
                # since its start: a topic created again under an old name comes back with them
                # (a later test's plain `ledger` was compacted and refused records without keys).
                kafka.stop()
                kafka = None
            if kafka is None:
                kafka = LocalKafka(
                    self.factory.mktemp(f"kafka-{alias}"),
                    overrides=TEST_BROKER_OVERRIDES,
                    security=WITH_AUTHORIZER,
                )
                self.started[alias] = kafka
            kafka.launch()
        return [
            Cluster(alias, self.started[alias].start().bootstrap, self.started[alias]) for alias in aliases
        ]

    def stop(self) -> None:
        for kafka in self.started.values():
            kafka.stop()

    def stop_beyond(self, count: int) -> None:
        """Stop the clusters after the first `count` aliases: the few tests that use a third
        start it again (seconds), where keeping it would idle a broker for the session."""
        for alias in ALIASES[count:]:
            kafka = self.started.pop(alias, None)
            if kafka is not None:
                kafka.stop()


_CLIENTS_BEFORE = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    result = yield
    # Counted once the fixtures are set up: a module or session fixture may keep clients of its
    # own (made at its setup) for the tests that share it.
    item.stash[_CLIENTS_BEFORE] = running_clients()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.failed:
        item.stash[_CLIENTS_BEFORE] = -1  # its traceback holds its frames, and their clients: not judged
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Every test leaves no librdkafka client running: one left alive goes on asking for the
    metadata of its topics, and recreated a topic on the shared clusters long after its test
    ended (tests/client_leaks.py). Checked after every fixture and pytest's own log capture (whose
    records of the test hold what their arguments reach) have let go."""
    result = yield
    before = item.stash.get(_CLIENTS_BEFORE, -1)
    leaked = None if before < 0 else leaked_since(before)
    if leaked:
        raise AssertionError(f"{item.nodeid} {leaked}")
    return result


@pytest.fixture(scope="session")
def worker_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerClusters]:
    clusters = WorkerClusters(tmp_path_factory)
    try:
        yield clusters
    finally:
        clusters.stop()


@pytest.fixture
def kafka_clusters(worker_clusters: WorkerClusters) -> Iterator[Callable[[int], list[Cluster]]]:
    """`kafka_clusters(2)` -> clusters A and B, emptied for this test and after it (so tests on
    `shared_clusters` never meet the fixed names, such as `heartbeats`, that it created)."""
    taken: list[Cluster] = []

    def take(count: int) -> list[Cluster]:
        clusters = worker_clusters.get(*ALIASES[:count])
        for cluster in clusters:
            empty_cluster(cluster.bootstrap)
        taken.extend(clusters)
        return clusters

    yield take
    for cluster in taken[:2]:
        if cluster.kafka is not None and all(node.running for node in cluster.kafka.nodes):
            empty_cluster(cluster.bootstrap)
    worker_clusters.stop_beyond(2)


@pytest.fixture
def shared_clusters(request: pytest.FixtureRequest) -> Iterator[list[Cluster]]:
    """Clusters A, B and C shared with other tests: create uniquely named topics and groups only.
    C starts when the test first reads its address, and stops after the test."""
    real = real_cluster_bootstraps()
    if real:
        yield [Cluster(alias, bootstrap) for alias, bootstrap in real.items()]
        return
    pool: WorkerClusters = request.getfixturevalue("worker_clusters")
    third = OnDemandCluster(pool, ALIASES[2])
    yield [*pool.get(*ALIASES[:2]), third]
    if third.started:
        pool.stop_beyond(2)


@contextlib.contextmanager
def cluster_pair(
    tmp_path_factory: pytest.TempPathFactory,
    security: Security | None = None,
    *,
    lines: tuple[str | None, str | None] = (None, None),
    link_delay_ms: float | None = None,
    overrides: tuple[dict[str, object], dict[str, object]] = ({}, {}),
) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    """Two clusters A and B of a module's own with `security`, on the Kafka `lines` named (None:
    the main line), each with a slow link of `link_delay_ms` when given and its broker
    `overrides`, started side by side (their JVMs start together), stopped when the block ends."""
    a, b = (
        LocalKafka(
            tmp_path_factory.mktemp(f"kafka-{alias}"),
            overrides={**TEST_BROKER_OVERRIDES, **extra},
            security=security,
            line=line,
            link_delay_ms=link_delay_ms,
        )
        for alias, line, extra in zip("AB", lines, overrides, strict=True)
    )
    try:
        a.launch()
        b.launch()
        a.start()
        b.start()
        yield a, b
    finally:
        a.stop()
        b.stop()


# A target that takes transactional batches written straight into a partition (as brokers before
# Kafka 3.6 did): how the tests of open and hanging transactions forge them (tests/integration/wire.py).
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def _unverified_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    with cluster_pair(tmp_path_factory, overrides=({}, UNVERIFIED)) as pair:
        yield pair


@pytest.fixture
def unverified_clusters(_unverified_pair: tuple[LocalKafka, LocalKafka]) -> list[Cluster]:
    """Clusters A and B of this module's tests (B with UNVERIFIED), emptied for each test as
    `kafka_clusters` empties the worker's. Started once for the module's tests on a worker
    instead of two brokers for each test (a start costs about 3.4 CPU-seconds)."""
    clusters = []
    for alias, kafka in zip("AB", _unverified_pair, strict=True):
        empty_cluster(kafka.bootstrap)
        clusters.append(Cluster(alias, kafka.bootstrap, kafka))
    return clusters


@pytest.fixture
def local_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalKafka]]:
    """Start clusters of this test's own (`local_kafka(brokers=3, overrides=..., security=...)`);
    every one is stopped at teardown."""
    started: list[LocalKafka] = []

    def start(**kwargs: object) -> LocalKafka:
        overrides = {**TEST_BROKER_OVERRIDES, **kwargs.pop("overrides", {})}  # type: ignore[dict-item]
        data_dir = kwargs.pop("data_dir", None) or tmp_path_factory.mktemp("kafka")
        kafka = LocalKafka(data_dir, overrides=overrides, **kwargs)  # type: ignore[arg-type]
        started.append(kafka)
        return kafka.start()

    yield start
    for kafka in started:
        kafka.stop()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names that never collide across tests sharing a cluster."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:10]}"


# Modules whose tests build on one another, in order, on one worker (one Airflow session, or one
# installed wheel, for the module). pytest-xdist's `xdist_group` mark does not reach its scheduler
# under pytest 9.2 (the mark is passed as a suffix of the node id, which pytest 9.2 no longer lets
# a plugin change:
# pytest-dev/pytest-xdist#1386), so such a module's tests were spread over workers, each worker
# starting the module's Airflow again and each seeing half of the day. The scheduler below keeps
# these modules whole itself, from their paths, whatever pytest does with node ids.
ONE_WORKER_MODULES = frozenset({"tests/e2e/test_browser.py", "tests/e2e/test_installed_wheel.py"})


# Modules whose tests share brokers of the module's own (a module-scoped fixture): spread over the
# workers, each worker that took one of their tests started the module's clusters again (a run
# started 32 brokers for these six modules' 17 tests; at 3.4 CPU-seconds a start). Kept whole,
# each starts them once. Unlike ONE_WORKER_MODULES they take their turn in the order.
SHARED_CLUSTER_MODULES = frozenset(
    {
        "tests/reliability/test_hanging_transactions.py",
        "tests/reliability/test_open_transactions.py",
        "tests/reliability/test_sweep_races.py",
        "tests/integration/test_secured_jobs.py",
        "tests/integration/test_least_privilege.py",
        "tests/integration/test_java_stores.py",
    }
)


class WholeModules(LoadGroupScheduling):
    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        whole = path in ONE_WORKER_MODULES or path in SHARED_CLUSTER_MODULES
        return path if whole else super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> WholeModules | None:
    return WholeModules(config, log) if config.getvalue("dist") in ("load", "loadgroup") else None
