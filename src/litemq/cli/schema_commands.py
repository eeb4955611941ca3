"""``litemq schema subjects|show|register|check|delete|compatibility``: the schema registry of a
broker's HTTP port (Confluent Schema Registry's REST API; docs/schema-registry.md), as
Confluent's REST calls are made by hand with ``curl``.

``--registry-url`` (default ``$LITEMQ_SCHEMA_REGISTRY_URL`` or ``http://127.0.0.1:8082``) names
the registry; ``--basic-auth USER:PASSWORD`` authenticates (brokers whose listeners are all SASL).
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request

import click

from litemq.cli.common import CliError, console, make_table

DEFAULT_URL = "http://127.0.0.1:8082"
TIMEOUT_S = 30


def _options(f):
    f = click.option("--basic-auth", "basic_auth", default=None, metavar="USER:PASSWORD",
                     help="Basic auth of the registry (a SASL/PLAIN or SCRAM user).")(f)
    return click.option("--registry-url", "url", default=lambda: os.environ.get("LITEMQ_SCHEMA_REGISTRY_URL",
                                                                               DEFAULT_URL),
                        show_default="$LITEMQ_SCHEMA_REGISTRY_URL or http://127.0.0.1:8082",
                        help="The schema registry: a broker's HTTP port.")(f)


def _call(url: str, basic_auth: str | None, method: str, path: str, body: dict | None = None):
    """The JSON answer of ``method path``.

    Raises:
        CliError: the registry's error (its code and message), or no answer.
    """
    req = urllib.request.Request(url.rstrip("/") + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    if basic_auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(basic_auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
            raise CliError(f"{answer.get('error_code')}: {answer.get('message')}") from None
        except ValueError:
            raise CliError(f"HTTP {exc.code} from {url}{path}") from None
    except OSError as exc:
        raise CliError(f"no answer from the schema registry at {url}: {exc}") from None


def _subject(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _read_schema(path: str, schema_type: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}") from None
    body = {"schema": text}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    return body


def _schema_file(f):
    """SUBJECT, SCHEMA_FILE, ``--type`` and the registry options of ``register`` and ``check``."""
    f = _options(f)
    f = click.option("--type", "schema_type", type=click.Choice(["AVRO", "JSON", "PROTOBUF"], case_sensitive=False),
                     default="AVRO", show_default=True, help="The schema's type.")(f)
    return click.argument("subject")(click.argument("path", metavar="SCHEMA_FILE")(f))


@click.group("schema")
def schema() -> None:
    """The schema registry: subjects, versions, compatibility (Confluent's API)."""


@schema.command("subjects")
@click.option("--deleted", is_flag=True, help="Soft-deleted subjects too.")
@_options
def schema_subjects(deleted, url, basic_auth) -> None:
    """Every subject with its versions."""
    names = _call(url, basic_auth, "GET", "/subjects" + ("?deleted=true" if deleted else ""))
    if not names:
        console.print("no subjects")
        return
    table = make_table("SUBJECT", "VERSIONS", "COMPATIBILITY")
    level = _call(url, basic_auth, "GET", "/config")["compatibilityLevel"]
    for name in names:
        versions = _call(url, basic_auth, "GET", f"/subjects/{_subject(name)}/versions"
                         + ("?deleted=true" if deleted else ""))
        own = _call(url, basic_auth, "GET", f"/config/{_subject(name)}?defaultToGlobal=true")["compatibilityLevel"]
        table.add_row(name, ",".join(map(str, versions)), own if own != level else f"{own} (global)")
    console.print(table)


@schema.command("show")
@click.argument("subject")
@click.option("--version", default="latest", show_default=True, help="A version number or latest.")
@_options
def schema_show(subject, version, url, basic_auth) -> None:
    """One version of a subject: its id, type and schema."""
    answer = _call(url, basic_auth, "GET", f"/subjects/{_subject(subject)}/versions/{urllib.parse.quote(version)}")
    console.print(f"subject {answer['subject']} version {answer['version']} id {answer['id']} "
                  f"type {answer.get('schemaType', 'AVRO')}")
    text = answer["schema"]
    try:
        text = json.dumps(json.loads(text), indent=2)
    except ValueError:
        pass
    click.echo(text)


@schema.command("register")
@_schema_file
def schema_register(subject, path, schema_type, url, basic_auth) -> None:
    """Register the schema in SCHEMA_FILE under SUBJECT (refused when incompatible)."""
    answer = _call(url, basic_auth, "POST", f"/subjects/{_subject(subject)}/versions",
                   _read_schema(path, schema_type.upper()))
    console.print(f"registered under [bold]{subject}[/]: id {answer['id']}")


@schema.command("check")
@_schema_file
def schema_check(subject, path, schema_type, url, basic_auth) -> None:
    """Whether SCHEMA_FILE may be registered under SUBJECT (its compatibility level); exit 1 if not."""
    answer = _call(url, basic_auth, "POST", f"/compatibility/subjects/{_subject(subject)}/versions?verbose=true",
                   _read_schema(path, schema_type.upper()))
    if answer["is_compatible"]:
        console.print("compatible")
        return
    raise CliError("incompatible: " + "; ".join(answer.get("messages") or []))


@schema.command("delete")
@click.argument("subject")
@click.option("--version", default=None, help="One version (default: the whole subject).")
@click.option("--permanent", is_flag=True, help="For good (after a soft delete).")
@_options
def schema_delete(subject, version, permanent, url, basic_auth) -> None:
    """Soft delete a subject or one version (or permanently, after a soft delete)."""
    path = f"/subjects/{_subject(subject)}" + (f"/versions/{urllib.parse.quote(version)}" if version else "")
    answer = _call(url, basic_auth, "DELETE", path + ("?permanent=true" if permanent else ""))
    versions = answer if isinstance(answer, list) else [answer]
    console.print(f"deleted {subject} version(s) {', '.join(map(str, versions))}"
                  + (" permanently" if permanent else ""))


@schema.command("compatibility")
@click.option("--subject", default=None, help="One subject's level (default: the global one).")
@click.option("--set", "level", default=None,
              type=click.Choice(["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                                 "FULL_TRANSITIVE"], case_sensitive=False), help="Set it.")
@_options
def schema_compatibility(subject, level, url, basic_auth) -> None:
    """Show or set the compatibility level, global or of one subject."""
    path = "/config" + (f"/{_subject(subject)}" if subject else "")
    if level:
        _call(url, basic_auth, "PUT", path, {"compatibility": level.upper()})
    shown = _call(url, basic_auth, "GET", path + ("?defaultToGlobal=true" if subject else ""))
    console.print(f"{subject or 'global'}: {shown['compatibilityLevel']}")


def register(main: click.Group) -> None:
    main.add_command(schema)
