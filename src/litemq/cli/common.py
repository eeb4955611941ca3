"""What every ``litemq`` command shares: the one-line error (:class:`CliError`), the consoles
and tables, ``KEY=VALUE`` pairs, and the one parser of ``HOST:PORT`` command-line values
(``-b/--bootstrap-server``, ``serve --listen/--advertise/--rpc-listen/--http-listen/--peers``).

Every command module imports this one and none imports another's command group, so the
command modules form no import cycle; ``cli/app.py`` registers them all on ``main``.
"""

from __future__ import annotations

import socket
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from litemq.config import DEFAULT_LISTEN

DEFAULT_BOOTSTRAP = DEFAULT_LISTEN
BOOTSTRAP_ENV = "LITEMQ_BOOTSTRAP_SERVER"
"""Environment variable read by every command with ``-b/--bootstrap-server``."""
PIPED_WIDTH = 10_000
"""Console width (characters) when stdout is not a terminal: piped output is never cut or
wrapped (rich would otherwise assume 80 columns), as Kafka's tools print it."""
DISABLED_VALUES = ("", "off", "none", "false", "disabled")
"""``--http-listen`` values that turn the HTTP port off (as ``http.listen`` in broker/http/app.py)."""

err_console = Console(stderr=True)
console = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
"""The stdout console of the commands: the terminal's width, or :data:`PIPED_WIDTH` when piped."""


class CliError(click.ClickException):
    """A readable failure: printed as ``error: message``, exit status 1."""

    def show(self, file=None) -> None:
        # one line whatever the terminal width (soft_wrap); the message is text, not markup
        err_console.print(f"[bold red]error:[/] {escape(self.message)}", soft_wrap=True)


def make_table(*headers: str, **kwargs) -> Table:
    """A rich table whose cells and headers fold on a narrow terminal instead of being cut with
    ``…``; ``kwargs`` as :class:`rich.table.Table`'s (``title=...``)."""
    return Table(*(Column(h, overflow="fold") for h in headers), **kwargs)


def parse_kv(pairs: tuple[str, ...], what: str) -> dict[str, str]:
    """``("a=1", "b=2")`` -> ``{"a": "1", "b": "2"}``.

    Raises:
        click.BadParameter: naming ``what``, for a pair without ``=``.
    """
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint=what)
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# ------------------------------------------------------------------ HOST:PORT values
def parse_address(text: str, *, resolve: bool = False) -> tuple[str, int]:
    """``"HOST:PORT"`` or ``"[IPv6]:PORT"`` -> (host, port); ``HOST`` may be empty.

    Args:
        resolve: also check that the host resolves (an address to bind to).

    Raises:
        ValueError: what is wrong, e.g. ``:PORT missing``, ``port 'x' is not a number``,
            ``port 70000 is not in 0..65535``, ``cannot resolve host 'x'``.
    """
    text = text.strip()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket:
            raise ValueError("']' missing after the IPv6 address")
        if not rest.startswith(":"):
            raise ValueError(":PORT missing")
        port = rest[1:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon:
            raise ValueError(":PORT missing")
        if ":" in host:
            raise ValueError("an IPv6 address goes in brackets, [::1]:PORT")
    if not port.isdigit():
        raise ValueError(f"port {port!r} is not a number" if port else "PORT missing after ':'")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port {int(port)} is not in 0..65535")
    if resolve and host:
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            raise ValueError(f"cannot resolve host {host!r}") from None
    return host, int(port)


def _bad(text: str, reason: str, form: str, example: str, ctx: click.Context,
         param: click.Parameter) -> click.BadParameter:
    """click prints it as ``Error: Invalid value for '--opt' (env var: ...): 'text': reason; expected ...``."""
    return click.BadParameter(f"{text!r}: {reason}; expected {form}, e.g. {example}", ctx=ctx, param=param)


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def address_callback(*, resolve: bool = False, allow_off: bool = False, example: str = DEFAULT_LISTEN):
    """A click option callback checking a ``HOST:PORT`` value (``off`` too with ``allow_off``);
    the error names the option and the form it takes."""
    form = "HOST:PORT or off" if allow_off else "HOST:PORT"

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is None or allow_off and value.strip().lower() in DISABLED_VALUES:
            return value
        try:
            parse_address(value, resolve=resolve)
        except ValueError as exc:
            raise _bad(value, str(exc), form, example, ctx, param) from None
        return value.strip()

    return check


def check_peers(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of ``--peers ID@HOST:PORT,...`` (Kafka's ``controller.quorum.voters``)."""
    if value is None:
        return None
    form, example = "ID@HOST:PORT,...", "1@127.0.0.1:9192,2@127.0.0.1:9193"
    items = _items(value)
    if not items:
        raise _bad(value, "no peer", form, example, ctx, param)
    for item in items:
        node, at, addr = item.partition("@")
        where = "" if len(items) == 1 else f"{item!r}: "
        if not at or not node.strip().isdigit():
            raise _bad(value, f"{where}ID@ missing", form, example, ctx, param)
        try:
            parse_address(addr)
        except ValueError as exc:
            raise _bad(value, f"{where}{exc}", form, example, ctx, param) from None
    return value


def check_bootstrap(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of ``-b/--bootstrap-server HOST:PORT[,HOST:PORT...]`` (``bootstrap.servers``)."""
    if value is None:
        return None
    form = "HOST:PORT[,HOST:PORT...]"
    items = _items(value)
    if not items:
        raise _bad(value, "no broker address", form, DEFAULT_BOOTSTRAP, ctx, param)
    for item in items:
        try:
            parse_address(item)
        except ValueError as exc:
            reason = str(exc) if len(items) == 1 else f"{item!r}: {exc}"
            raise _bad(value, reason, form, DEFAULT_BOOTSTRAP, ctx, param) from None
    return ",".join(items)


def bootstrap_server_option(f):
    """``-b/--bootstrap-server`` (env :data:`BOOTSTRAP_ENV`), checked as ``HOST:PORT[,HOST:PORT...]``."""
    return click.option("-b", "--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                        envvar=BOOTSTRAP_ENV, show_envvar=True, callback=check_bootstrap,
                        metavar="HOST:PORT[,...]",
                        help="Any broker of the cluster, or several comma-separated.")(f)
