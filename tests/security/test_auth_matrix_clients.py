"""Authorization matrix with real clients over SASL_SSL (issue 12): confluent-kafka
(SCRAM-SHA-512), kafka-python (SCRAM-SHA-256) and aiokafka (PLAIN, checked by the broker against
the SCRAM credentials) x their client-level operations x five callers:

- ``nocreds``: TLS without SASL (``security.protocol=SSL``) on the SASL_SSL port: the broker
  closes the connection at the first request after ApiVersions, so nothing can succeed;
- ``badpw``: a wrong password for the user that holds every ACL the operation needs: the broker
  answers SASL_AUTHENTICATION_FAILED and the client reports its authentication error
  (confluent-kafka ``_AUTHENTICATION``, kafka-python and aiokafka ``SaslAuthenticationFailed``,
  error 58), the operation fails;
- ``noacl``: a valid user without ACLs; ``deny<i>``: the needed ACLs with the i-th one DENIED
  next to an ALLOW of ALL on its resource; ``allow``: exactly the needed ALLOWs.

Refusals must be the client's mapping of Kafka's error code (TOPIC_/GROUP_/CLUSTER_/
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), listings must leave the resource out, and a refused
operation must leave the broker state unchanged (checked with raw requests of the super user).
Every user is created when the module starts with AlterUserScramCredentials (KIP-554) by the
super user; the operations of the unauthenticated callers run concurrently with short client
timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from litemq.security.acl_operations import AclOperation as O
from litemq.security.acl_operations import ResourceType as R
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acls import AclPermissionType as P
from litemq.testing.process import BrokerProcess
from tests.security.security_helpers import (
    AUTHORIZATION_CODES,
    FILTERED,
    NO_OPERATIONS,
    AdminWire,
    Need,
    acl_rows,
    password_of,
    sasl_ssl_overrides,
    scram_upsertion,
)

FAST_TIMEOUT_S = 10.0
"""Client timeouts where the broker answers (refused or allowed)."""
REFUSED_TIMEOUT_S = 4.0
"""Client timeouts of refused callers (a client that keeps retrying a refusal gives up then)."""
UNREACHABLE_TIMEOUT_S = 3.0
"""Client timeouts where the broker closes every connection (nocreds, badpw)."""
NOACL_USER = "cm_noacl"
T, G, C, X = R.TOPIC, R.GROUP, R.CLUSTER, R.TRANSACTIONAL_ID


class BrokerError(Exception):
    """An operation's answer carried Kafka error codes (clients that return rather than raise)."""

    def __init__(self, codes) -> None:
        super().__init__(f"error codes {sorted(codes)}")
        self.codes = set(codes)


class SilentRefusal(Exception):
    """The client answered a refusal without its error code (an empty result, a bare message);
    accepted only for the operations a client is known to report that way."""


ERROR_IN_TEXT = re.compile(r"\[Error (-?\d+)\]")
"""kafka-python and aiokafka print a Kafka error as ``[Error 29] TopicAuthorizationFailedError``."""
AIOKAFKA_TOPIC_NOT_AUTHORIZED = re.compile(r"Topic .* is not authorized for this client")
"""aiokafka's warning for a topic answered TOPIC_AUTHORIZATION_FAILED in a Metadata response."""


def codes_in_text(texts) -> set[int]:
    out: set[int] = set()
    for t in texts:
        out |= {int(x) for x in ERROR_IN_TEXT.findall(t)}
        if AIOKAFKA_TOPIC_NOT_AUTHORIZED.search(t):
            out.add(E.TOPIC_AUTHORIZATION_FAILED)
    return out


def kp_codes_in(obj, depth: int = 0) -> set[int]:
    """Kafka error codes in a kafka-python admin result: error classes or instances, their names,
    and ``[Error N]`` texts (kafka-python returns refusals inside dicts instead of raising)."""
    import kafka.errors as kerr
    out: set[int] = set()
    if depth > 8 or obj is None:
        return out
    if isinstance(obj, type) and issubclass(obj, kerr.KafkaError) or isinstance(obj, kerr.KafkaError):
        errno = getattr(obj, "errno", None)
        return {errno} if isinstance(errno, int) and errno else out
    if isinstance(obj, str):
        cls = getattr(kerr, obj, None)
        if isinstance(cls, type) and issubclass(cls, kerr.KafkaError) and getattr(cls, "errno", 0):
            out.add(cls.errno)
        return out | codes_in_text([obj])
    if isinstance(obj, dict):
        obj = [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set)):
        for v in obj:
            out |= kp_codes_in(v, depth + 1)
    return out


def codes_in(obj, depth: int = 0) -> set[int]:
    """Every ``error_code`` in a client's response object (dicts, lists, objects, aiokafka Structs)."""
    out: set[int] = set()
    if depth > 8 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return out
    if hasattr(obj, "to_object") and callable(obj.to_object):
        return codes_in(obj.to_object(), depth + 1)
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("error_code", "errorCode") and isinstance(v, int):
                out.add(v)
            else:
                out |= codes_in(v, depth + 1)
        return out
    if isinstance(obj, (list, tuple, set)):
        for v in obj:
            out |= codes_in(v, depth + 1)
        return out
    if hasattr(obj, "__dict__"):
        return codes_in({k: v for k, v in vars(obj).items() if not k.startswith("_")}, depth + 1)
    return out


def raise_codes(obj, find=codes_in):
    """``obj``, or BrokerError when ``find`` (codes_in, kp_codes_in) sees a non-zero error code in it."""
    codes = find(obj) - {0}
    if codes:
        raise BrokerError(codes)
    return obj


def kp_raise(obj):
    return raise_codes(obj, kp_codes_in)


@dataclass
class Cell:
    """One (client, operation, caller): resource names, the client settings and setup results."""

    client: str
    op: str
    case: str
    admin: AdminWire
    topic: str = ""
    group: str = ""
    txn: str = ""
    user: str | None = None
    password: str | None = None
    timeout_s: float = FAST_TIMEOUT_S
    s: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    """confluent-kafka error_cb events of this cell's clients."""


@dataclass
class Op:
    """A client-level operation: ``run(env, cell)`` returns a value or raises; ``needs`` in the
    order Kafka checks them; ``setup``/``state``/``allowed`` as in the wire matrix."""

    name: str
    needs: tuple[Need, ...]
    setup: Callable | None = None
    state: Callable | None = None
    allowed: Callable | None = None
    listed: Callable | None = None
    any_first: bool = False
    """The client may hit any of the needs first (several requests), so ``noacl`` accepts the
    refusal code of any of them."""


# ============================================================== setups and state (super user)
def _eventually(check: Callable[[], bool], timeout_s: float = FAST_TIMEOUT_S) -> bool:
    """Whether ``check`` holds within ``timeout_s``. An acks=1 answer comes before the fsync that
    moves the high watermark (the durable default), and a commit's markers follow EndTxn's answer
    (as in Kafka), so the high watermark may take a moment to show an allowed write."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _topic(c):
    c.admin.create_topic(c.topic)


def _topic_records(c):
    c.admin.create_topic(c.topic)
    c.admin.produce(c.topic, 2)


def _group(c):
    c.admin.create_topic(c.topic)
    c.admin.commit(c.group, c.topic, 1)


def _acl_target(c):
    return f"acl-target-{c.client}-{c.op}-{c.case}"


def _scram_target(c):
    return f"made_{c.client}_{c.op}_{c.case}"


OPS: dict[str, Op] = {o.name: o for o in [
    Op("create_topic", (Need(T, O.CREATE),), state=lambda c: c.admin.partitions(c.topic),
       allowed=lambda c, v: c.admin.partitions(c.topic) == 1),
    Op("list_topics", (Need(T, O.DESCRIBE, FILTERED),), setup=_topic, listed=lambda c, v: c.topic in v),
    Op("describe_topics", (Need(T, O.DESCRIBE),), setup=_topic),
    Op("produce", (Need(T, O.WRITE),), setup=_topic, state=lambda c: c.admin.offsets(c.topic),
       allowed=lambda c, v: _eventually(lambda: c.admin.offsets(c.topic)[1] == 1)),
    Op("consume_commit", (Need(T, O.READ), Need(G, O.READ)), setup=_topic_records, any_first=True,
       state=lambda c: c.admin.committed(c.group, c.topic),
       allowed=lambda c, v: c.admin.committed(c.group, c.topic) >= 1 and v == b"v"),
    Op("list_offsets", (Need(T, O.DESCRIBE),), setup=_topic_records, allowed=lambda c, v: v == 2),
    Op("describe_configs", (Need(T, O.DESCRIBE_CONFIGS),), setup=_topic),
    Op("alter_configs", (Need(T, O.ALTER_CONFIGS),), setup=_topic,
       state=lambda c: c.admin.topic_config(c.topic, "retention.ms"),
       allowed=lambda c, v: c.admin.topic_config(c.topic, "retention.ms") == "123456"),
    Op("create_partitions", (Need(T, O.ALTER),), setup=_topic, state=lambda c: c.admin.partitions(c.topic),
       allowed=lambda c, v: c.admin.partitions(c.topic) == 2),
    Op("delete_records", (Need(T, O.DELETE),), setup=_topic_records, state=lambda c: c.admin.offsets(c.topic),
       allowed=lambda c, v: c.admin.offsets(c.topic)[0] == 1),
    Op("describe_group", (Need(G, O.DESCRIBE),), setup=_group),
    Op("list_groups", (Need(G, O.DESCRIBE, FILTERED),), setup=_group, listed=lambda c, v: c.group in v),
    Op("delete_group", (Need(G, O.DELETE),), setup=_group, state=lambda c: c.group in c.admin.list_groups(),
       allowed=lambda c, v: c.group not in c.admin.list_groups()),
    Op("transaction", (Need(X, O.WRITE), Need(T, O.WRITE)), setup=_topic,
       state=lambda c: c.admin.offsets(c.topic),
       allowed=lambda c, v: _eventually(lambda: c.admin.offsets(c.topic)[1] >= 2)),  # the record and the commit marker
    Op("describe_cluster", (Need(C, O.DESCRIBE, NO_OPERATIONS),)),
    Op("create_acls", (Need(C, O.ALTER),), state=lambda c: c.admin.acls_on(R.TOPIC, _acl_target(c)),
       allowed=lambda c, v: len(c.admin.acls_on(R.TOPIC, _acl_target(c))) == 1),
    Op("describe_acls", (Need(C, O.DESCRIBE),), allowed=lambda c, v: v),
    Op("delete_acls", (Need(C, O.ALTER),),
       setup=lambda c: c.admin.create_acls([(R.TOPIC, _acl_target(c), "User:nobody", O.READ, P.ALLOW)]),
       state=lambda c: c.admin.acls_on(R.TOPIC, _acl_target(c)),
       allowed=lambda c, v: not c.admin.acls_on(R.TOPIC, _acl_target(c))),
    Op("alter_scram", (Need(C, O.ALTER),), state=lambda c: c.admin.scram_user(_scram_target(c)),
       allowed=lambda c, v: c.admin.scram_user(_scram_target(c))[0] == E.NONE),
    Op("describe_scram", (Need(C, O.DESCRIBE),), allowed=lambda c, v: v),
    Op("delete_topic", (Need(T, O.DELETE),), setup=_topic, state=lambda c: c.admin.partitions(c.topic),
       allowed=lambda c, v: c.admin.partitions(c.topic) is None),
]}


# ============================================================== confluent-kafka
def _ck_conf(c: Cell, env) -> dict:
    conf = {"bootstrap.servers": env.bootstrap, "ssl.ca.location": str(env.pki.ca_pem), "log_level": 0,
            "error_cb": c.errors.append}
    if c.user is None:
        return {**conf, "security.protocol": "SSL"}
    return {**conf, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": c.user,
            "sasl.password": c.password}


def _ck_admin(c, env):
    from confluent_kafka.admin import AdminClient
    return AdminClient(_ck_conf(c, env))


def _ck_result(futures, c):
    """Wait for every future of an AdminClient call (dict or single); returns the results."""
    if isinstance(futures, dict):
        return {k: f.result(c.timeout_s + 5) for k, f in futures.items()}
    return futures.result(c.timeout_s + 5)


def _ck_produce(c, env, transactional=False):
    from confluent_kafka import KafkaException, Producer
    conf = {**_ck_conf(c, env), "message.timeout.ms": int(c.timeout_s * 1000), "enable.idempotence": False,
            "socket.timeout.ms": int(c.timeout_s * 1000)}
    if transactional:
        conf = {**conf, "transactional.id": c.txn, "transaction.timeout.ms": 60000}
        del conf["enable.idempotence"]
    p = Producer(conf)
    errors = []
    try:
        if transactional:
            p.init_transactions(c.timeout_s)
            p.begin_transaction()
        p.produce(c.topic, b"v", on_delivery=lambda err, msg: errors.append(err))
        if transactional:
            p.commit_transaction(c.timeout_s)
        else:
            p.flush(c.timeout_s + 5)
    finally:
        p.poll(0.1)  # serves error_cb
    if errors and errors[0] is not None:
        raise KafkaException(errors[0])
    if not errors:
        raise TimeoutError("no delivery report")
    return True


def _ck_consume(c, env):
    from confluent_kafka import Consumer, KafkaException
    cons = Consumer({**_ck_conf(c, env), "group.id": c.group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 10000})
    try:
        cons.subscribe([c.topic])
        deadline = time.monotonic() + c.timeout_s
        while time.monotonic() < deadline:
            m = cons.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            cons.commit(message=m, asynchronous=False)
            return m.value()
        raise TimeoutError("no record consumed")
    finally:
        cons.close()


def _ck_run(op: str, c: Cell, env):
    if op in ("produce", "transaction"):
        return _ck_produce(c, env, transactional=op == "transaction")
    if op == "consume_commit":
        return _ck_consume(c, env)
    a = _ck_admin(c, env)
    try:
        return _ck_admin_op(op, a, c)
    finally:
        a.poll(0.1)  # serves error_cb (the client's authentication/transport errors)


def _ck_admin_op(op: str, a, c: Cell):
    from confluent_kafka import KafkaException, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    t = c.timeout_s
    if op == "create_topic":
        return _ck_result(a.create_topics([NewTopic(c.topic, 1, 1)], request_timeout=t), c)
    if op == "list_topics":
        return set(a.list_topics(timeout=t).topics)
    if op == "describe_topics":
        return _ck_result(a.describe_topics(TopicCollection([c.topic]), request_timeout=t), c)
    if op == "list_offsets":
        res = _ck_result(a.list_offsets({TopicPartition(c.topic, 0): OffsetSpec.latest()}, request_timeout=t), c)
        return next(iter(res.values())).offset
    if op == "describe_configs":
        return _ck_result(a.describe_configs([ConfigResource(ResourceType.TOPIC, c.topic)], request_timeout=t), c)
    if op == "alter_configs":
        res = ConfigResource(ResourceType.TOPIC, c.topic, incremental_configs=[
            ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
        return _ck_result(a.incremental_alter_configs([res], request_timeout=t), c)
    if op == "create_partitions":
        return _ck_result(a.create_partitions([NewPartitions(c.topic, 2)], request_timeout=t), c)
    if op == "delete_records":
        return _ck_result(a.delete_records([TopicPartition(c.topic, 0, 1)], request_timeout=t), c)
    if op == "describe_group":
        return _ck_result(a.describe_consumer_groups([c.group], request_timeout=t), c)
    if op == "list_groups":
        res = _ck_result(a.list_consumer_groups(request_timeout=t), c)
        if res.errors:  # one per broker that could not be asked
            err = res.errors[0]
            raise err if isinstance(err, BaseException) else KafkaException(err)
        return {g.group_id for g in res.valid}
    if op == "delete_group":
        return _ck_result(a.delete_consumer_groups([c.group], request_timeout=t), c)
    if op == "describe_cluster":
        return _ck_result(a.describe_cluster(include_authorized_operations=True, request_timeout=t), c) \
            .authorized_operations or []
    if op == "create_acls":
        b = AclBinding(ResourceType.TOPIC, _acl_target(c), ResourcePatternType.LITERAL, "User:nobody", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
        return _ck_result(a.create_acls([b], request_timeout=t), c)
    if op == "describe_acls":
        f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
        acls = _ck_result(a.describe_acls(f, request_timeout=t), c)
        if not acls:  # confluent-kafka drops DescribeAcls' top-level error code: an empty list
            raise SilentRefusal("no ACLs described")
        return acls
    if op == "delete_acls":
        f = AclBindingFilter(ResourceType.TOPIC, _acl_target(c), ResourcePatternType.LITERAL, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
        return _ck_result(a.delete_acls([f], request_timeout=t), c)
    if op == "alter_scram":
        up = UserScramCredentialUpsertion(_scram_target(c), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"pw-1")
        return _ck_result(a.alter_user_scram_credentials([up], request_timeout=t), c)
    if op == "describe_scram":
        return _ck_result(a.describe_user_scram_credentials(request_timeout=t), c)
    if op == "delete_topic":
        return _ck_result(a.delete_topics([c.topic], request_timeout=t), c)
    raise AssertionError(op)


def _ck_codes(exc) -> set[int]:
    from confluent_kafka import KafkaException
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "code"):
        return {exc.args[0].code()}
    return getattr(exc, "codes", set())


def _ck_auth_failed(c: Cell, exc, logs) -> bool:
    from confluent_kafka import KafkaError
    return any(e.code() == KafkaError._AUTHENTICATION for e in c.errors) or KafkaError._AUTHENTICATION in _ck_codes(exc)


# ============================================================== kafka-python
def _kp_conf(c: Cell, env) -> dict:
    conf = {"bootstrap_servers": env.bootstrap, "ssl_cafile": str(env.pki.ca_pem),
            "request_timeout_ms": int(c.timeout_s * 1000), "bootstrap_timeout_ms": int(c.timeout_s * 1000)}
    if c.user is None:
        return {**conf, "security_protocol": "SSL"}
    return {**conf, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": c.user, "sasl_plain_password": c.password}


def _kp_run(op: str, c: Cell, env):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    conf = _kp_conf(c, env)
    if op in ("produce", "transaction"):
        extra = {"transactional_id": c.txn} if op == "transaction" else {"enable_idempotence": False}
        p = KafkaProducer(**conf, max_block_ms=int(c.timeout_s * 1000), **extra)
        try:
            if op == "transaction":
                p.init_transactions()
                p.begin_transaction()
            p.send(c.topic, b"v").get(c.timeout_s)
            if op == "transaction":
                p.commit_transaction()
            return True
        finally:
            p.close(timeout=1)
    if op == "consume_commit":
        cons = KafkaConsumer(**conf, auto_offset_reset="earliest", enable_auto_commit=False, group_id=c.group)
        try:
            cons.subscribe([c.topic])
            deadline = time.monotonic() + c.timeout_s
            while time.monotonic() < deadline:
                for records in cons.poll(timeout_ms=200).values():
                    cons.commit()
                    return records[0].value
            raise TimeoutError("no record consumed")
        finally:
            cons.close()
    a = KafkaAdminClient(**conf)
    try:
        if op == "create_topic":
            return raise_codes(a.create_topics([NewTopic(c.topic, 1, 1)]))
        if op == "list_topics":
            return set(a.list_topics())
        if op == "describe_topics":
            return raise_codes(a.describe_topics([c.topic]))
        if op == "list_offsets":
            res = kp_raise(a.list_partition_offsets({TopicPartition(c.topic, 0): OffsetSpec.LATEST}))
            return next(iter(res.values())).offset
        if op == "describe_configs":
            res = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, c.topic)], config_filter="all")
            if not res.get("topic", {}).get(c.topic):  # kafka-python drops the error code: no configs
                raise SilentRefusal(f"no configs: {res!r}")
            return res
        if op == "alter_configs":
            return kp_raise(a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, c.topic,
                                                            configs={"retention.ms": "123456"})],
                                            raise_on_unknown=False))
        if op == "create_partitions":
            return raise_codes(a.create_partitions({c.topic: NewPartitions(2)}))
        if op == "delete_records":
            return raise_codes(a.delete_records({TopicPartition(c.topic, 0): 1}))
        if op == "describe_group":
            return kp_raise(raise_codes(a.describe_groups([c.group])))
        if op == "list_groups":
            return {g["group_id"] if isinstance(g, dict) else g[0] for g in raise_codes(a.list_groups())}
        if op == "delete_group":
            return kp_raise(a.delete_groups([c.group]))
        if op == "describe_cluster":
            return raise_codes(a.describe_cluster())
        if op == "create_acls":
            acl = ACL("User:nobody", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                      ResourcePattern(ResourceType.TOPIC, _acl_target(c)))
            return kp_raise(a.create_acls([acl]))
        if op == "describe_acls":
            f = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
            acls, err = a.describe_acls(f)
            if err is not None and getattr(err, "errno", 0):
                raise err
            return acls
        if op == "delete_acls":
            f = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, _acl_target(c), ACLResourcePatternType.LITERAL))
            res = a.delete_acls([f])
            for _flt, _acls, err in res:
                if err is not None and getattr(err, "errno", 0):
                    raise err
            return res
        if op == "alter_scram":
            res = a.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(_scram_target(c), ScramMechanism.SCRAM_SHA_256, "pw-1")])
            if any(res.values()):  # kafka-python returns only the error message of each user
                raise SilentRefusal(f"refused: {res!r}")
            return res
        if op == "describe_scram":
            return raise_codes(a.describe_user_scram_credentials())
        if op == "delete_topic":
            return raise_codes(a.delete_topics([c.topic]))
    finally:
        a.close()
    raise AssertionError(op)


def _kp_codes(exc) -> set[int]:
    if isinstance(exc, BrokerError):
        return exc.codes
    errno = getattr(exc, "errno", None)
    return {errno} if isinstance(errno, int) else set()


def _auth_failed_in_logs(c: Cell, exc, logs) -> bool:
    """kafka-python and aiokafka report a failed SASL authentication (error 58) in the exception
    or, when it happens while bootstrapping, in their log."""
    texts = [str(exc), *(str(getattr(exc, "__cause__", "") or "")), *logs]
    return any("SaslAuthenticationFailed" in t or "Error 58" in t for t in texts) or \
        58 in _kp_codes(exc)


# ============================================================== aiokafka
def _aio_conf(c: Cell, env) -> dict:
    conf = {"bootstrap_servers": env.bootstrap, "ssl_context": env.aio_ssl, "request_timeout_ms":
            int(c.timeout_s * 1000)}
    if c.user is None:
        return {**conf, "security_protocol": "SSL"}
    return {**conf, "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": c.user,
            "sasl_plain_password": c.password}


async def _aio_run(op: str, c: Cell, env):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import (
        AIOKafkaAdminClient,
        NewPartitions,
        NewTopic,
        RecordsToDelete,
    )
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    conf = _aio_conf(c, env)
    if op in ("produce", "transaction"):
        extra = {"transactional_id": c.txn} if op == "transaction" else {}
        p = AIOKafkaProducer(**conf, **extra)
        try:
            await p.start()
            if op == "transaction":
                await p.begin_transaction()
                delivered = await p.send(c.topic, b"v")
                # a refused AddPartitionsToTxn leaves the batch undelivered and the transaction in
                # an abortable error, which commit_transaction raises
                await asyncio.wait([delivered], timeout=c.timeout_s)
                await p.commit_transaction()
                await delivered
            else:
                await asyncio.wait_for(p.send_and_wait(c.topic, b"v"), c.timeout_s)
            return True
        finally:
            await p.stop()
    if op in ("consume_commit", "list_offsets"):
        group = {"group_id": c.group} if op == "consume_commit" else {}
        cons = AIOKafkaConsumer(**conf, auto_offset_reset="earliest", enable_auto_commit=False, **group)
        try:
            await cons.start()
            tp = TopicPartition(c.topic, 0)
            if op == "list_offsets":
                return (await asyncio.wait_for(cons.end_offsets([tp]), c.timeout_s))[tp]
            cons.subscribe([c.topic])
            m = await asyncio.wait_for(cons.getone(), c.timeout_s)
            await cons.commit()
            return m.value
        finally:
            await cons.stop()
    a = AIOKafkaAdminClient(**conf)
    try:
        await a.start()
        if op == "create_topic":
            return raise_codes(await a.create_topics([NewTopic(c.topic, 1, 1)]))
        if op == "list_topics":
            return set(await a.list_topics())
        if op == "describe_topics":
            return raise_codes(await a.describe_topics([c.topic]))
        if op == "describe_configs":
            return raise_codes(await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, c.topic)]))
        if op == "alter_configs":
            return raise_codes(await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, c.topic,
                                                                     {"retention.ms": "123456"})]))
        if op == "create_partitions":
            return raise_codes(await a.create_partitions({c.topic: NewPartitions(2)}))
        if op == "delete_records":
            return raise_codes(await a.delete_records({TopicPartition(c.topic, 0): RecordsToDelete(1)}))
        if op == "describe_group":
            return raise_codes(await a.describe_consumer_groups([c.group]))
        if op == "list_groups":
            return {g[0] for g in await a.list_consumer_groups()}
        if op == "describe_cluster":
            return raise_codes(await a.describe_cluster())
        if op == "delete_topic":
            return raise_codes(await a.delete_topics([c.topic]))
    finally:
        await a.close()
    raise AssertionError(op)


# ============================================================== the clients
@dataclass
class Client:
    name: str
    mechanism: str
    ops: tuple[str, ...]
    run: Callable
    codes: Callable
    auth_failed: Callable
    is_async: bool = False
    allowed_only: tuple[str, ...] = ()
    """Operations run only by the allowed user: the client cannot survive Kafka's refusal."""
    silent_refusals: tuple[str, ...] = ()
    """Operations whose refusal the client reports without an error code (:class:`SilentRefusal`)."""
    no_leader_codes: frozenset = frozenset()
    """What the client reports when it cannot find a partition's leader because Metadata refused
    the topic (no DESCRIBE): accepted in place of TOPIC_AUTHORIZATION_FAILED for such a user."""


COMMON = ("create_topic", "list_topics", "describe_topics", "produce", "consume_commit", "list_offsets",
          "describe_configs", "alter_configs", "create_partitions", "delete_records", "describe_group",
          "list_groups", "transaction", "describe_cluster", "delete_topic")
CLIENTS = {
    "confluent": Client("confluent", "SCRAM-SHA-512",
                        COMMON + ("delete_group", "create_acls", "describe_acls", "delete_acls", "alter_scram",
                                  "describe_scram"), _ck_run, _ck_codes, _ck_auth_failed,
                        # confluent-kafka 2.16.1 / librdkafka 2.16.0 abort the process ("munmap_chunk():
                        # invalid pointer") on a DescribeUserScramCredentials answer with the top-level
                        # CLUSTER_AUTHORIZATION_FAILED Kafka sends; the refusal is covered by the wire
                        # matrix and kafka-python
                        allowed_only=("describe_scram",), silent_refusals=("describe_acls",),
                        no_leader_codes=frozenset({-156})),  # _NOENT "No leaders found"
    "kafka-python": Client("kafka-python", "SCRAM-SHA-256",
                           COMMON + ("delete_group", "create_acls", "describe_acls", "delete_acls", "alter_scram",
                                     "describe_scram"), _kp_run, _kp_codes, _auth_failed_in_logs,
                           silent_refusals=("describe_configs", "alter_scram"),
                           no_leader_codes=frozenset({E.UNKNOWN_TOPIC_OR_PARTITION})),
    # aiokafka's admin client has no group deletion, ACL or SCRAM administration
    "aiokafka": Client("aiokafka", "PLAIN", COMMON, _aio_run, _kp_codes, _auth_failed_in_logs, is_async=True,
                       no_leader_codes=frozenset({E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION})),
}


def cases_of(op: Op) -> list[str]:
    return ["noacl", *(f"deny{i}" for i in range(len(op.needs))), "allow"]


def user_of(client: str, op: str, case: str) -> str:
    return NOACL_USER if case == "noacl" else f"cm_{client}_{op}_{case}".replace("-", "_")


def names_of(client: str, op: str, case: str) -> tuple[str, str, str]:
    base = f"cm-{client}-{op}-{case}".replace("_", "-")
    return base, "g-" + base, "x-" + base


def _acl_rows() -> list[tuple]:
    out = []
    for client in CLIENTS.values():
        for op_name in client.ops:
            for case in cases_of(OPS[op_name]):
                if case != "noacl":
                    principal = "User:" + user_of(client.name, op_name, case)
                    out += acl_rows(OPS[op_name].needs, case, principal, *names_of(client.name, op_name, case))
    return out


@dataclass
class Env:
    bootstrap: str
    pki: Any
    admin: AdminWire
    aio_ssl: Any = None


@pytest.fixture(scope="module")
def env(pki, tmp_path_factory):
    from aiokafka.helpers import create_ssl_context
    with BrokerProcess(tmp_path_factory.mktemp("authclients") / "data", listeners={"SASL_SSL": 0},
                       overrides=sasl_ssl_overrides(pki)) as bp:
        admin = AdminWire(bp.ports["SASL_SSL"], pki.client_context())
        users = {NOACL_USER} | {user_of(cl.name, o, case) for cl in CLIENTS.values() for o in cl.ops
                                for case in cases_of(OPS[o]) if case != "noacl"}
        # every user is created now, at runtime, through AlterUserScramCredentials (PLAIN users
        # of aiokafka are checked against the same credentials)
        admin.upsert_scram([scram_upsertion(u, password_of(u), m) for u in sorted(users)
                            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        admin.create_acls(_acl_rows())
        admin.init_pid("warm-up")
        admin.create_topic("warm-up")
        admin.commit("warm-up", "warm-up", 0)
        yield Env(bp.bootstrap("SASL_SSL"), pki, admin, create_ssl_context(cafile=str(pki.ca_pem)))
        admin.close()


@dataclass
class Result:
    ok: bool
    value: Any = None
    exc: BaseException | None = None
    logs: list = field(default_factory=list)
    """kafka-python/aiokafka warnings while it ran (all cells' when they ran concurrently)."""


def _run_cells(client: Client, cells: list[Cell], env: Env, concurrent: bool) -> list[Result]:
    def one(c: Cell) -> Result:
        try:
            return Result(True, client.run(c.op, c, env))
        except Exception as exc:  # noqa: BLE001 - the outcome is judged by the caller
            return Result(False, exc=exc)

    async def one_async(c: Cell) -> Result:
        try:
            return Result(True, await client.run(c.op, c, env))
        except Exception as exc:  # noqa: BLE001
            return Result(False, exc=exc)

    if concurrent:
        with _ClientLog() as logs:
            if client.is_async:
                async def all_cells():
                    return await asyncio.gather(*(one_async(c) for c in cells))
                results = asyncio.run(all_cells())
            else:
                with ThreadPoolExecutor(len(cells)) as pool:
                    results = list(pool.map(one, cells))
        for r in results:
            r.logs = logs
        return results
    results = []
    for c in cells:
        with _ClientLog() as logs:
            r = asyncio.run(one_async(c)) if client.is_async else one(c)
        r.logs = logs
        results.append(r)
    return results


def _cell(client: Client, op: str, case: str, env: Env) -> Cell:
    topic, group, txn = names_of(client.name, op, case)
    c = Cell(client.name, op, case, env.admin, topic, group, txn)
    if case in ("noacl", "allow") or case.startswith("deny"):
        c.user = user_of(client.name, op, case)
        c.password = password_of(c.user)
        c.timeout_s = FAST_TIMEOUT_S if case == "allow" else REFUSED_TIMEOUT_S
    elif case == "badpw":
        c.user = user_of(client.name, op, "allow")
        c.password = "wrong-" + password_of(c.user)
        c.timeout_s = UNREACHABLE_TIMEOUT_S
    else:
        c.timeout_s = UNREACHABLE_TIMEOUT_S
    return c


def _describe(exc) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class _ClientLog(logging.Handler):
    """Collects the warnings of kafka-python and aiokafka (where they report a failed SASL
    authentication met while bootstrapping) as a list of messages."""

    LOGGERS = ("kafka", "aiokafka")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> list[str]:
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self.messages

    def __exit__(self, *exc) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)


@pytest.mark.parametrize("client_name", list(CLIENTS))
@pytest.mark.parametrize("case", ["nocreds", "badpw", "noacl", "deny", "allow"])
def test_client_matrix(env, client_name, case):
    client = CLIENTS[client_name]
    cells = []
    for op in client.ops:
        if case != "allow" and op in client.allowed_only:
            continue
        cases = [case] if case != "deny" else [c for c in cases_of(OPS[op]) if c.startswith("deny")]
        cells += [_cell(client, op, k, env) for k in cases]
    befores = []
    for c in cells:
        o = OPS[c.op]
        if o.setup:
            o.setup(c)
        befores.append(o.state(c) if o.state else None)
    results = _run_cells(client, cells, env, concurrent=case in ("nocreds", "badpw"))
    problems = []
    for c, before, res in zip(cells, befores, results):
        o = OPS[c.op]
        where = f"{c.op}/{c.case}"
        if c.case == "allow":
            problems += _judge_allowed(client, o, c, res, where)
            continue
        problems += _judge_refused(client, o, c, res, where)
        if o.state and o.state(c) != before:
            problems.append(f"{where}: state changed ({before!r} -> {o.state(c)!r})")
    assert not problems, "\n".join(problems)


def _judge_allowed(client: Client, o: Op, c: Cell, res: Result, where: str) -> list[str]:
    if not res.ok:
        return [f"{where}: allowed operation failed: {_describe(res.exc)}"]
    if o.listed and not o.listed(c, res.value):
        return [f"{where}: allowed resource not listed"]
    if any(n.refusal == NO_OPERATIONS for n in o.needs) and _has_describe(res.value) is False:
        return [f"{where}: no DESCRIBE among the authorized operations {res.value!r}"]
    if o.allowed and not o.allowed(c, res.value):
        return [f"{where}: allowed operation did not take effect ({res.value!r})"]
    return []


def _has_describe(value) -> bool | None:
    """Whether the authorized operations a describe-cluster call returned include DESCRIBE; None
    when the client does not ask for them (aiokafka)."""
    if isinstance(value, dict):
        keys = ("authorized_operations", "cluster_authorized_operations")
        if not any(k in value for k in keys):
            return None
        value = next(value[k] for k in keys if k in value)
    if isinstance(value, int):
        return value > 0 and bool(value & (1 << int(O.DESCRIBE)))
    return any(getattr(v, "name", str(v)).upper().rsplit(".", 1)[-1] == "DESCRIBE" for v in value or [])


def _judge_refused(client: Client, o: Op, c: Cell, res: Result, where: str) -> list[str]:
    if c.case == "nocreds":
        if res.ok:
            return [f"{where}: succeeded without credentials ({res.value!r})"]
        if client.codes(res.exc) & AUTHORIZATION_CODES:
            return [f"{where}: an unauthenticated request reached the authorizer: {_describe(res.exc)}"]
        return []
    if c.case == "badpw":
        if res.ok:
            return [f"{where}: succeeded with a wrong password ({res.value!r})"]
        if not client.auth_failed(c, res.exc, res.logs):
            return [f"{where}: no authentication error reported: {_describe(res.exc)}"]
        return []
    need = o.needs[int(c.case[len("deny"):])] if c.case.startswith("deny") else o.needs[0]
    expected = need.expected()
    if expected == FILTERED:
        if not res.ok:
            return [f"{where}: listing failed: {_describe(res.exc)}"]
        return [f"{where}: refused resource listed"] if o.listed(c, res.value) else []
    if expected == NO_OPERATIONS:  # Kafka answers DescribeCluster, without authorized operations
        if not res.ok:
            return [f"{where}: DescribeCluster failed: {_describe(res.exc)}"]
        return [f"{where}: authorized operations {res.value!r}"] if _has_describe(res.value) else []
    if res.ok:
        return [f"{where}: refused operation succeeded ({res.value!r})"]
    if isinstance(res.exc, SilentRefusal):
        return [] if c.op in client.silent_refusals else [f"{where}: refused without an error code: {res.exc}"]
    codes = client.codes(res.exc) | (codes_in_text(res.logs) if client.name != "confluent" else set())
    wanted = {n.expected() for n in o.needs} if (c.case == "noacl" and o.any_first) else {expected}
    if E.TOPIC_AUTHORIZATION_FAILED in wanted and not _may_describe_topic(o, c):
        wanted |= client.no_leader_codes
    if not codes & wanted:
        names = [E(x).name if x in E._value2member_map_ else x for x in wanted]
        return [f"{where}: expected {names}, got {_describe(res.exc)}"]
    return []


def _may_describe_topic(o: Op, c: Cell) -> bool:
    """Whether the cell's user may DESCRIBE its topic: granted or implied by an ALLOW of READ,
    WRITE, DELETE or ALTER, or by the ALLOW of ALL next to a DENY (a DENY of READ does not deny
    DESCRIBE; only a DENY of DESCRIBE does)."""
    if c.case == "noacl":
        return False
    implies = {O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER}
    if c.case.startswith("deny"):
        denied = o.needs[int(c.case[len("deny"):])]
        if denied.rtype == T:
            return denied.op != O.DESCRIBE
    return any(n.rtype == T and n.op in implies for n in o.needs)
