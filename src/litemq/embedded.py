"""``litemq.Broker``: a real LiteMQ broker inside the current Python process.

The broker runs on its own event-loop thread, listening on loopback, so any Kafka client in the
same process (or another one) can use it::

    with litemq.Broker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

Nothing is mocked: it is the same :class:`~litemq.broker.broker.BrokerRuntime` that
``litemq serve`` runs, with a temporary data directory unless one is given.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from pathlib import Path

from litemq.config import BrokerConfig


class Broker:
    """An embedded broker.

    Args:
        data_dir: where logs live; ``None`` = a temporary directory removed on ``close()``.
        port: TCP port on ``host``; 0 picks a free one (see :attr:`port`).
        host: interface to listen on (default loopback).
        listeners: listener name -> port on ``host`` (0 = a free one), e.g.
            ``{"PLAINTEXT": 0, "SSL": 0}``; replaces ``port``. TLS listeners need the ``ssl.*``
            settings in ``overrides`` (see ``docs/security.md``).
        overrides: broker settings by Kafka name (``{"ssl.client.auth": "required"}``), applied
            after ``settings``.
        http_port: the HTTP port (``/metrics``, web console, REST API; :attr:`http_url`) on
            ``host``: None = off (an embedded broker never takes ``litemq serve``'s default
            8082 unless ``http.listen`` is set), 0 = a free one.
        **settings: broker settings with Kafka names, underscores for dots
            (``num_partitions=3``, ``auto_create_topics_enable=False``).

    Raises:
        OSError: the port is taken. RuntimeError: the broker failed to start (the cause chained).
        ValueError: a bad setting (named in the message).
        litemq.storage.dir_lock.DataDirInUseError (an OSError): another broker, in this process
            or another, has ``data_dir`` open (its ``.lock``); the message names its pid.
    """

    def __init__(self, data_dir: str | Path | None = None, port: int = 0, host: str = "127.0.0.1",
                 start: bool = True, listeners: dict[str, int] | None = None,
                 overrides: dict[str, str] | None = None, http_port: int | None = None, **settings) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="litemq-")
            data_dir = self._tmp
        kafka_settings = {k.replace("_", "."): str(v) for k, v in settings.items()}
        if listeners:
            kafka_settings["listeners"] = ",".join(f"{name}://{host}:{p}" for name, p in listeners.items())
        kafka_settings.setdefault("http.listen", "off" if http_port is None else f"{host}:{http_port}")
        kafka_settings.update(overrides or {})
        self.host = host
        self.config = BrokerConfig.from_sources(overrides=kafka_settings, data_dir=Path(data_dir),
                                                listen_host=host, listen_port=port)
        self.runtime = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        return self.runtime.port

    @property
    def ports(self) -> dict[str, int]:
        """Listener name -> bound port."""
        return dict(self.runtime.ports)

    def bootstrap(self, listener: str | None = None) -> str:
        """``"host:port"`` of ``listener`` (the first one when None) for ``bootstrap.servers``.

        Raises:
            KeyError: no such listener.
        """
        port = self.port if listener is None else self.runtime.ports[listener.upper()]
        return f"{self.host}:{port}"

    @property
    def http_url(self) -> str | None:
        """``http://host:port`` of the HTTP port (``/metrics``, ``/console/``, ``/v3``), None when off."""
        return self.runtime.http.url

    @property
    def bootstrap_servers(self) -> str:
        """``"host:port"`` of the first listener for a client's ``bootstrap.servers``."""
        return self.bootstrap()

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir)

    def start(self) -> "Broker":
        """Start the broker thread and wait until it listens. A broker already running (the
        constructor starts it unless ``start=False``) is left as it is."""
        from litemq.broker.broker import BrokerRuntime

        if self._thread is not None and self._thread.is_alive():
            return self

        ready = threading.Event()
        error: list[BaseException] = []
        self.runtime = BrokerRuntime(self.config)  # locks the data dir (DataDirInUseError)
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self.runtime.start())
            except BaseException as exc:  # reported to the starting thread
                error.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="litemq-broker", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            self._thread.join()
            self.runtime.log_manager.close_all()  # the data dir is free again
            raise RuntimeError(f"LiteMQ broker failed to start: {error[0]}") from error[0]
        return self

    def close(self) -> None:
        """Shut down cleanly (flush, close logs), end every task of the broker's loop and close
        it (nothing is left pending: no "Task was destroyed" at exit), and remove a temporary
        data dir."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            fut.result(timeout=60)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            if not self._thread.is_alive():
                self._loop.close()
        self._thread = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    async def _shutdown(self) -> None:
        """The broker's clean stop, then what ``asyncio.run`` does at its end: cancel and await
        every task still on this loop, close async generators and the default executor."""
        await self.runtime.stop()
        loop = asyncio.get_running_loop()
        tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_asyncgens()
        await loop.shutdown_default_executor()

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop thread and return its result (for tools/tests)."""
        async def wrapper():
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout=60)

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"litemq.Broker(bootstrap_servers={self.bootstrap_servers!r}, data_dir={str(self.data_dir)!r})"
