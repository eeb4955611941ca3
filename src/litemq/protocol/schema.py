"""Load Kafka's JSON message schemas and compile them into fast Python codecs.

Source: the vendored Apache Kafka 3.9 schemas in ``schemas/message/*.json`` (format in
``schemas/SCHEMA-FORMAT.md``); serialization rules follow Kafka's ``MessageGenerator`` output
(KIP-482 flexible versions and tagged fields, KIP-893 nullable structs).

For each message one Python class per struct is generated (``__slots__``, attribute names are
the snake_case schema names, every field of every version present). For each (message, version)
pair, decoder and encoder source code is generated on first use, compiled with ``exec`` and
cached; fixed-width runs of fields are read and written with one ``struct.Struct`` each.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from litemq import limits
from litemq.protocol import primitives as P
from litemq.protocol.errors import DecodeError

SCHEMA_DIR = Path(__file__).parent / "schemas" / "message"

_FIXED = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
_VARIABLE = {"string", "bytes", "records"}
PRIMITIVES = frozenset(_FIXED) | _VARIABLE
_VMAX = 0x7FFF


# ----------------------------------------------------------------------------- JSON loading


def strip_comments(text: str) -> str:
    """Remove ``//`` line comments from Kafka's commented JSON, leaving ``//`` inside strings."""
    out = []
    for line in text.splitlines():
        if "//" not in line:
            out.append(line)
            continue
        in_str = False
        i = 0
        n = len(line)
        cut = n
        while i < n:
            c = line[i]
            if in_str:
                if c == "\\":
                    i += 2
                    continue
                if c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "/" and i + 1 < n and line[i + 1] == "/":
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def load_json(path: Path) -> dict:
    """Parse one schema file (comments stripped)."""
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def parse_versions(s) -> tuple[int, int] | None:
    """``"0+"``, ``"3-5"``, ``"7"`` or ``"none"`` -> inclusive ``(lo, hi)`` or None (no versions)."""
    if s is None:
        return None
    s = str(s).strip()
    if s == "none" or s == "":
        return None
    if s.endswith("+"):
        return int(s[:-1]), _VMAX
    if "-" in s:
        lo, hi = s.split("-", 1)
        return int(lo), int(hi)
    return int(s), int(s)


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def snake_case(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``; ``KRaftVersion`` -> ``k_raft_version``."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


# ----------------------------------------------------------------------------- model


@dataclass
class FieldDef:
    """One field of a struct, across all versions."""

    name: str
    attr: str
    type: str  # the schema type string, e.g. "int32", "[]string", "[]Topic", "Cursor"
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    flexible: tuple[int, int] | None | bool  # True = follows the message
    default_raw: object
    is_array: bool = False
    elem: str = ""  # element type name (primitive name or struct name)
    struct: StructDef | None = None  # set for struct / array-of-struct fields

    def present(self, v: int) -> bool:
        return _in(self.versions, v)

    def is_nullable(self, v: int) -> bool:
        return _in(self.nullable, v)

    def is_tagged(self, v: int) -> bool:
        return self.tag is not None and _in(self.tagged, v)


@dataclass
class StructDef:
    """A struct (the message root, an inline struct or a common struct)."""

    name: str
    fields: list[FieldDef]
    cls: type | None = None
    path: str = ""


@dataclass
class MessageDef:
    name: str
    kind: str  # request | response | header | data
    api_key: int | None
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    root: StructDef
    structs: dict[str, StructDef] = field(default_factory=dict)


def _build_message(d: dict) -> MessageDef:
    structs: dict[str, StructDef] = {}
    pending: list[FieldDef] = []

    def mk_fields(fields: list[dict], path: str) -> list[FieldDef]:
        out = []
        for f in fields:
            t = f["type"]
            is_array = t.startswith("[]")
            elem = t[2:] if is_array else t
            fd = FieldDef(
                name=f["name"],
                attr=snake_case(f["name"]),
                type=t,
                versions=parse_versions(f.get("versions")),
                nullable=parse_versions(f.get("nullableVersions")),
                tagged=parse_versions(f.get("taggedVersions")),
                tag=f.get("tag"),
                flexible=parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else True,
                default_raw=f.get("default"),
                is_array=is_array,
                elem=elem,
            )
            if "fields" in f:
                sd = StructDef(elem, mk_fields(f["fields"], path + "." + elem), path=path + "." + elem)
                structs.setdefault(elem, sd)
                fd.struct = sd
            elif elem not in PRIMITIVES:
                pending.append(fd)
            out.append(fd)
        return out

    root = StructDef(d["name"], mk_fields(d.get("fields", []), d["name"]), path=d["name"])
    for cs in d.get("commonStructs", []):
        structs.setdefault(cs["name"], StructDef(cs["name"], mk_fields(cs["fields"], cs["name"]), path=cs["name"]))
    for fd in pending:
        if fd.elem not in structs:
            raise ValueError(f"{d['name']}: unknown type {fd.type} for field {fd.name}")
        fd.struct = structs[fd.elem]
    valid = parse_versions(d.get("validVersions"))
    if valid is None:
        raise ValueError(f"{d['name']}: no validVersions")
    flexible = parse_versions(d.get("flexibleVersions"))
    msg = MessageDef(d["name"], d["type"], d.get("apiKey"), valid, flexible, root, structs)
    _make_classes(msg)
    return msg


# ----------------------------------------------------------------------------- defaults


def _int_default(raw) -> int:
    s = str(raw).strip()
    neg = s.startswith("-")
    if neg:
        s = s[1:]
    if s.lower().startswith("0x"):
        v = int(s, 16)
    elif len(s) > 1 and s.startswith("0"):
        v = int(s, 8)
    else:
        v = int(s)
    return -v if neg else v


def default_expr(fd: FieldDef) -> str:
    """Python source for the field's default value (a fresh object for lists/structs)."""
    raw = fd.default_raw
    if fd.is_array:
        if raw == "null":
            return "None"
        return "[]"
    t = fd.elem
    if fd.struct is not None:
        if raw == "null":
            return "None"
        return f"_C_{fd.struct.name}()"
    if raw == "null":
        return "None"
    if t == "bool":
        if raw is None:
            return "False"
        return "True" if str(raw).lower() == "true" else "False"
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return repr(_int_default(raw)) if raw is not None else "0"
    if t == "float64":
        return repr(float(raw)) if raw is not None else "0.0"
    if t == "string":
        return repr(str(raw)) if raw is not None else "''"
    if t == "bytes":
        return "b''"
    if t == "uuid":
        return "_ZU"
    if t == "records":
        return "None" if fd.nullable is not None else "b''"
    raise ValueError(f"no default for {fd.type}")


def _is_mutable_default(fd: FieldDef) -> bool:
    e = default_expr(fd)
    return e == "[]" or e.startswith("_C_")


# ----------------------------------------------------------------------------- classes


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


class KafkaStruct:
    """Base of every generated message/struct class.

    Instances compare equal when they are the same class with equal fields; ``to_dict()``
    returns nested plain dicts/lists.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{self.__class__.__qualname__}({inner})"

    def to_dict(self) -> dict:
        """Nested plain ``dict``/``list`` copy of this object."""

        def conv(v):
            if isinstance(v, KafkaStruct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {f: conv(getattr(self, f)) for f in self._fields}


def _class_source(sd: StructDef) -> str:
    attrs = [f.attr for f in sd.fields]
    params = []
    body = []
    for f in sd.fields:
        if _is_mutable_default(f):
            params.append(f"{f.attr}=_M")
            body.append(f"    self.{f.attr} = {default_expr(f)} if {f.attr} is _M else {f.attr}")
        else:
            params.append(f"{f.attr}={default_expr(f)}")
            body.append(f"    self.{f.attr} = {f.attr}")
    if not body:
        body.append("    pass")
    cmp = " and ".join(f"self.{a} == other.{a}" for a in attrs) or "True"
    eq = (
        "def __eq__(self, other):\n"
        "    if other.__class__ is not self.__class__:\n"
        "        return NotImplemented\n"
        f"    return {cmp}\n"
    )
    if not params:
        return "def __init__(self):\n    pass\n" + eq, attrs
    return f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n" + eq, attrs


def _make_classes(msg: MessageDef) -> None:
    ns: dict = {"_M": MISSING, "_ZU": P.ZERO_UUID}
    all_structs = [msg.root] + [s for s in msg.structs.values()]
    for sd in all_structs:
        code, attrs = _class_source(sd)
        loc: dict = {}
        exec(compile(code, f"<litemq {sd.path} class>", "exec"), ns, loc)
        qual = msg.root.name if sd is msg.root else f"{msg.root.name}.{sd.name}"
        cls = type(
            sd.name,
            (KafkaStruct,),
            {
                "__slots__": tuple(attrs),
                "_fields": tuple(attrs),
                "__init__": loc["__init__"],
                "__eq__": loc["__eq__"],
                "__qualname__": qual,
                "__module__": "litemq.protocol.messages",
                "__doc__": f"Kafka {msg.root.name} struct {sd.name} (generated from the schema).",
            },
        )
        sd.cls = cls
        ns[f"_C_{sd.name}"] = cls
    for sd in msg.structs.values():
        setattr(msg.root.cls, sd.name, sd.cls)


# ----------------------------------------------------------------------------- code generation


class _Gen:
    """Generates decoder/encoder source for one (message, version)."""

    def __init__(self, msg: MessageDef, version: int) -> None:
        self.msg = msg
        self.v = version
        self.flex = _in(msg.flexible, version)
        self.ns: dict = {
            "_DE": DecodeError,
            "_P": P,
            "_uv": P.read_uvarint,
            "_wuv": P.write_uvarint,
            "_ruuid": P.read_uuid,
            "_ub": P.uuid_bytes,
            "_ZU": P.ZERO_UUID,
            "_M": MISSING,
            "_Mapping": Mapping,
            "_coerce": coerce,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_MAXTAGS": limits.MAX_TAGGED_FIELDS,
        }
        for sd in [msg.root, *msg.structs.values()]:
            self.ns[f"_C_{sd.name}"] = sd.cls
        self.lines: list[str] = []
        self.nstruct = 0
        self.done: set[str] = set()
        self.todo: list[StructDef] = []
        self.minsize_cache: dict[str, int] = {}

    # -- helpers
    def _struct(self, fmt: str) -> str:
        name = f"_S{self.nstruct}"
        self.nstruct += 1
        self.ns[name] = struct.Struct(">" + fmt)
        return name

    def field_flex(self, f: FieldDef) -> bool:
        if f.flexible is True:
            return self.flex
        return self.flex and _in(f.flexible, self.v)

    def minsize(self, sd: StructDef) -> int:
        if sd.name in self.minsize_cache:
            return self.minsize_cache[sd.name]
        n = 0
        for f in sd.fields:
            if not f.present(self.v) or f.is_tagged(self.v):
                continue
            n += self.field_minsize(f)
        if self.flex:
            n += 1
        self.minsize_cache[sd.name] = n
        return n

    def field_minsize(self, f: FieldDef) -> int:
        fl = self.field_flex(f)
        if f.is_array:
            return 1 if fl else 4
        if f.struct is not None:
            return 1 if f.is_nullable(self.v) else self.minsize(f.struct)
        if f.elem in _FIXED:
            return _FIXED[f.elem][1]
        if f.elem == "string":
            return 1 if fl else 2
        return 1 if fl else 4

    def elem_minsize(self, f: FieldDef) -> int:
        fl = self.field_flex(f)
        if f.struct is not None:
            return self.minsize(f.struct)
        if f.elem in _FIXED:
            return _FIXED[f.elem][1]
        if f.elem == "string":
            return 1 if fl else 2
        return 1 if fl else 4

    def need(self, sd: StructDef) -> None:
        if sd.name not in self.done:
            self.done.add(sd.name)
            self.todo.append(sd)

    def generate(self) -> dict:
        self.need(self.msg.root)
        while self.todo:
            sd = self.todo.pop()
            self.gen_decoder(sd)
            self.gen_encoder(sd)
        # bind primitives as module globals (``_P_read_cstr``) instead of attribute lookups
        src = ("\n".join(self.lines) + "\n").replace("_P.", "_P_")
        for name in dir(P):
            if not name.startswith("__"):
                self.ns["_P_" + name] = getattr(P, name)
        exec(compile(src, f"<litemq {self.msg.name} v{self.v}>", "exec"), self.ns)
        self.ns["__source__"] = src
        return self.ns

    # -- decoding
    def read_value(self, f: FieldDef, var: str, ind: str, out: list[str]) -> None:
        """Code reading one value of field ``f`` (non-fixed, or fixed standalone) into ``var``."""
        v = self.v
        fl = self.field_flex(f)
        nullable = f.is_nullable(v)
        if f.is_array:
            ms = max(1, self.elem_minsize(f))  # no zero-size elements: bounds the count by bytes left
            cnt = "_P.read_ccount" if fl else "_P.read_count"
            out.append(f"{ind}_n, pos = {cnt}(buf, pos, end, {ms}, {nullable})")
            out.append(f"{ind}if _n < 0:")
            out.append(f"{ind}    {var} = None")
            out.append(f"{ind}else:")
            i2 = ind + "    "
            if f.struct is not None:
                self.need(f.struct)
                out.append(f"{i2}{var} = []")
                out.append(f"{i2}_app = {var}.append")
                out.append(f"{i2}for _ in range(_n):")
                out.append(f"{i2}    _o, pos = _d_{f.struct.name}(buf, pos, end)")
                out.append(f"{i2}    _app(_o)")
            elif f.elem in _FIXED and f.elem != "uuid":
                code, size = _FIXED[f.elem]
                out.append(f"{i2}{var} = list(_unpack_from('>%d{code}' % _n, buf, pos))")
                out.append(f"{i2}pos += {size} * _n")
            else:
                out.append(f"{i2}{var} = []")
                out.append(f"{i2}_app = {var}.append")
                out.append(f"{i2}for _ in range(_n):")
                self.read_scalar(f.elem, fl, False, "_x", i2 + "    ", out)
                out.append(f"{i2}    _app(_x)")
            return
        if f.struct is not None:
            self.need(f.struct)
            if nullable:
                out.append(f"{ind}_b = buf[pos]")
                out.append(f"{ind}pos += 1")
                out.append(f"{ind}if _b >= 128:")
                out.append(f"{ind}    {var} = None")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {var}, pos = _d_{f.struct.name}(buf, pos, end)")
            else:
                out.append(f"{ind}{var}, pos = _d_{f.struct.name}(buf, pos, end)")
            return
        self.read_scalar(f.elem, fl, nullable, var, ind, out)

    def read_scalar(self, t: str, fl: bool, nullable: bool, var: str, ind: str, out: list[str]) -> None:
        if t in _FIXED:
            code, size = _FIXED[t]
            s = self._struct(code)
            out.append(f"{ind}({var},) = {s}.unpack_from(buf, pos)")
            out.append(f"{ind}pos += {size}")
            if t == "uuid":
                out.append(f"{ind}{var} = _ruuid({var})")
            return
        if t == "string":
            fn = {(False, False): "read_str", (False, True): "read_nstr", (True, False): "read_cstr", (True, True): "read_ncstr"}[(fl, nullable)]
            out.append(f"{ind}{var}, pos = _P.{fn}(buf, pos, end)")
            return
        if t == "bytes":
            fn = {(False, False): "read_bytes", (False, True): "read_nbytes", (True, False): "read_cbytes", (True, True): "read_ncbytes"}[(fl, nullable)]
            out.append(f"{ind}{var}, pos = _P.{fn}(buf, pos, end)")
            return
        if t == "records":
            fn = "read_crecords" if fl else "read_records"
            out.append(f"{ind}{var}, pos = _P.{fn}(buf, pos, end, {nullable})")
            return
        raise ValueError(t)

    def gen_decoder(self, sd: StructDef) -> None:
        v = self.v
        L = self.lines
        L.append(f"def _d_{sd.name}(buf, pos, end):")
        body: list[str] = []
        ind = "    "
        regular = [(i, f) for i, f in enumerate(sd.fields) if f.present(v) and not f.is_tagged(v)]
        tagged = sorted(
            ((i, f) for i, f in enumerate(sd.fields) if f.present(v) and f.is_tagged(v)), key=lambda x: x[1].tag
        )
        run: list[tuple[int, FieldDef]] = []

        def flush():
            if not run:
                return
            fmt = "".join(_FIXED[f.elem][0] for _, f in run)
            size = sum(_FIXED[f.elem][1] for _, f in run)
            s = self._struct(fmt)
            names = ", ".join(f"f{i}" for i, _ in run)
            body.append(f"{ind}({names},) = {s}.unpack_from(buf, pos)")
            body.append(f"{ind}pos += {size}")
            for i, f in run:
                if f.elem == "uuid":
                    body.append(f"{ind}f{i} = _ruuid(f{i})")
            run.clear()

        for i, f in regular:
            if not f.is_array and f.struct is None and f.elem in _FIXED:
                run.append((i, f))
                continue
            flush()
            self.read_value(f, f"f{i}", ind, body)
        flush()
        if self.flex:
            for i, f in tagged:
                body.append(f"{ind}f{i} = {default_expr(f)}")
            body.append(f"{ind}if buf[pos] == 0:")
            body.append(f"{ind}    pos += 1")
            body.append(f"{ind}else:")
            i2 = ind + "    "
            body.append(f"{i2}_nt, pos = _uv(buf, pos)")
            body.append(f"{i2}if _nt > _MAXTAGS:")
            body.append(f"{i2}    raise _DE('%d tagged fields exceed the limit' % _nt)")
            body.append(f"{i2}for _ in range(_nt):")
            i3 = i2 + "    "
            body.append(f"{i3}_tag, pos = _uv(buf, pos)")
            body.append(f"{i3}_sz, pos = _uv(buf, pos)")
            body.append(f"{i3}if _sz > end - pos:")
            body.append(f"{i3}    raise _DE('tagged field size %d exceeds the %d bytes left' % (_sz, end - pos))")
            body.append(f"{i3}_tend = pos + _sz")
            kw = "if"
            for i, f in tagged:
                body.append(f"{i3}{kw} _tag == {f.tag}:")
                self.read_value(f, f"f{i}", i3 + "    ", body)
                body.append(f"{i3}    if pos != _tend:")
                body.append(f"{i3}        raise _DE('tagged field {f.name} has the wrong size')")
                kw = "elif"
            if tagged:
                body.append(f"{i3}else:")
                body.append(f"{i3}    pos = _tend")
            else:
                body.append(f"{i3}pos = _tend")
        args = []
        present = {i for i, _ in regular} | {i for i, _ in tagged}
        for i, f in enumerate(sd.fields):
            args.append(f"f{i}" if i in present else default_expr(f))
        body.append(f"{ind}return _C_{sd.name}({', '.join(args)}), pos")
        L.extend(body)
        L.append("")

    # -- encoding
    def write_value(self, f: FieldDef, expr: str, ind: str, out: list[str], bvar: str = "b", ovar: str = "out") -> None:
        v = self.v
        fl = self.field_flex(f)
        nullable = f.is_nullable(v)
        if f.is_array:
            out.append(f"{ind}_a = {expr}")
            out.append(f"{ind}if _a is None:")
            if nullable:
                null = "b'\\x00'" if fl else "b'\\xff\\xff\\xff\\xff'"
                out.append(f"{ind}    {bvar} += {null}")
            else:
                out.append(f"{ind}    raise ValueError('null in non-nullable array field {f.name}')")
            out.append(f"{ind}else:")
            i2 = ind + "    "
            if fl:
                out.append(f"{i2}_wuv({bvar}, len(_a) + 1)")
            else:
                out.append(f"{i2}{bvar} += _P.I32.pack(len(_a))")
            if f.struct is not None:
                self.need(f.struct)
                out.append(f"{i2}for _x in _a:")
                out.append(f"{i2}    _e_{f.struct.name}(_x, {bvar}, {ovar})")
            elif f.elem in _FIXED and f.elem != "uuid":
                code, _ = _FIXED[f.elem]
                out.append(f"{i2}{bvar} += _pack('>%d{code}' % len(_a), *_a)")
            else:
                out.append(f"{i2}for _x in _a:")
                self.write_scalar(f.elem, fl, False, "_x", i2 + "    ", out, bvar, ovar)
            return
        if f.struct is not None:
            self.need(f.struct)
            if nullable:
                out.append(f"{ind}_s = {expr}")
                out.append(f"{ind}if _s is None:")
                out.append(f"{ind}    {bvar}.append(255)")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {bvar}.append(1)")
                out.append(f"{ind}    _e_{f.struct.name}(_s, {bvar}, {ovar})")
            else:
                out.append(f"{ind}_e_{f.struct.name}({expr}, {bvar}, {ovar})")
            return
        self.write_scalar(f.elem, fl, nullable, expr, ind, out, bvar, ovar)

    def write_scalar(self, t, fl, nullable, expr, ind, out, bvar="b", ovar="out") -> None:
        if t in _FIXED:
            code, _ = _FIXED[t]
            s = self._struct(code)
            if t == "uuid":
                expr = f"_ub({expr})"
            out.append(f"{ind}{bvar} += {s}.pack({expr})")
            return
        if t == "string":
            fn = {(False, False): "write_str", (False, True): "write_nstr", (True, False): "write_cstr", (True, True): "write_ncstr"}[(fl, nullable)]
            out.append(f"{ind}_P.{fn}({bvar}, {expr})")
            return
        if t == "bytes":
            fn = {(False, False): "write_bytes", (False, True): "write_nbytes", (True, False): "write_cbytes", (True, True): "write_ncbytes"}[(fl, nullable)]
            out.append(f"{ind}_P.{fn}({bvar}, {expr})")
            return
        if t == "records":
            out.append(f"{ind}_P.write_records({bvar}, {expr}, {ovar}, {nullable}, {fl})")
            return
        raise ValueError(t)

    def gen_encoder(self, sd: StructDef) -> None:
        v = self.v
        L = self.lines
        L.append(f"def _e_{sd.name}(o, b, out):")
        body: list[str] = []
        ind = "    "
        body.append(f"{ind}if o.__class__ is not _C_{sd.name}:")
        body.append(f"{ind}    o = _coerce(_C_{sd.name}, o)")
        regular = [f for f in sd.fields if f.present(v) and not f.is_tagged(v)]
        tagged = sorted((f for f in sd.fields if f.present(v) and f.is_tagged(v)), key=lambda f: f.tag)
        run: list[FieldDef] = []

        def flush():
            if not run:
                return
            fmt = "".join(_FIXED[f.elem][0] for f in run)
            s = self._struct(fmt)
            args = ", ".join(f"_ub(o.{f.attr})" if f.elem == "uuid" else f"o.{f.attr}" for f in run)
            body.append(f"{ind}b += {s}.pack({args})")
            run.clear()

        for f in regular:
            if not f.is_array and f.struct is None and f.elem in _FIXED:
                run.append(f)
                continue
            flush()
            self.write_value(f, f"o.{f.attr}", ind, body)
        flush()
        if self.flex:
            if not tagged:
                body.append(f"{ind}b.append(0)")
            else:
                body.append(f"{ind}_tg = []")
                for f in tagged:
                    d = default_expr(f)
                    body.append(f"{ind}_t = o.{f.attr}")
                    if f.struct is not None and not f.is_array:
                        body.append(f"{ind}if _t is not None and _t.__class__ is not _C_{f.struct.name}:")
                        body.append(f"{ind}    _t = _coerce(_C_{f.struct.name}, _t)")
                    if d == "[]":
                        cond = "_t"
                    elif d == "None":
                        cond = "_t is not None"
                    elif d.startswith("_C_"):
                        dn = f"_DEF_{f.struct.name}"
                        self.ns[dn] = f.struct.cls()
                        cond = f"_t != {dn}"
                    else:
                        cond = f"_t != {d}"
                    body.append(f"{ind}if {cond}:")
                    body.append(f"{ind}    _tb = bytearray()")
                    self.write_value(f, "_t", ind + "    ", body, bvar="_tb", ovar="None")
                    body.append(f"{ind}    _tg.append(({f.tag}, _tb))")
                body.append(f"{ind}if _tg:")
                body.append(f"{ind}    _P.write_tagged(b, _tg)")
                body.append(f"{ind}else:")
                body.append(f"{ind}    b.append(0)")
        if len(body) == 2:
            body.append(f"{ind}pass")
        L.extend(body)
        L.append("")


def coerce(cls: type, o):
    """Turn a Mapping (snake_case keys) or a duck-typed object into an instance of ``cls``.

    Missing keys take the schema defaults. Raises ValueError for unknown keys or a value that
    is neither a Mapping nor an object with the class's attributes.
    """
    if o.__class__ is dict or isinstance(o, Mapping):  # a plain dict skips the ABC check
        try:
            return cls(**o)
        except TypeError:
            unknown = sorted(set(o) - set(cls._fields))
            raise ValueError(
                f"{cls.__qualname__}: unknown field(s) {unknown}; valid fields are {list(cls._fields)}"
            ) from None
    if o is None:
        raise ValueError(f"{cls.__qualname__}: got None for a non-nullable struct")
    if isinstance(o, KafkaStruct) or any(hasattr(o, f) for f in cls._fields):
        return cls(**{f: getattr(o, f) for f in cls._fields if hasattr(o, f)})
    raise ValueError(f"{cls.__qualname__}: cannot encode {type(o).__name__} {o!r}")


# ----------------------------------------------------------------------------- spec


class MessageSpec:
    """Codec for one Kafka message (e.g. ``ProduceRequest``) across all its versions.

    Attributes: ``api_key`` (int, None for headers/data), ``name`` (schema name),
    ``min_version``/``max_version`` (schema ``validVersions``), ``flexible_min_version`` (first
    flexible version or None), ``cls`` (generated root class; nested struct classes are
    attributes of it, e.g. ``ProduceRequest.TopicProduceData``).
    """

    def __init__(self, msg: MessageDef) -> None:
        self._msg = msg
        self.api_key: int | None = msg.api_key
        self.name: str = msg.name
        self.kind: str = msg.kind
        self.min_version, self.max_version = msg.valid
        self.flexible_min_version: int | None = msg.flexible[0] if msg.flexible else None
        self.cls: type = msg.root.cls
        self._dec: dict[int, object] = {}
        self._enc: dict[int, object] = {}
        self.structs: dict[str, type] = {n: s.cls for n, s in msg.structs.items()}

    def __repr__(self) -> str:
        return f"<MessageSpec {self.name} v{self.min_version}-{self.max_version}>"

    def is_flexible(self, version: int) -> bool:
        """True if ``version`` uses compact encodings and tagged fields (KIP-482)."""
        return _in(self._msg.flexible, version)

    def supports(self, version: int) -> bool:
        """True if ``min_version <= version <= max_version``."""
        return self.min_version <= version <= self.max_version

    def new(self, **fields):
        """A new root object; unspecified fields take the schema defaults."""
        return self.cls(**fields)

    def has_field(self, attr: str, version: int) -> bool:
        """True if the root struct has field ``attr`` (snake_case) at ``version``."""
        return any(f.attr == attr and f.present(version) for f in self._msg.root.fields)

    def _compile(self, version: int):
        if not self.supports(version):
            raise DecodeError(f"{self.name}: unsupported version {version} (valid {self.min_version}-{self.max_version})")
        ns = _Gen(self._msg, version).generate()
        root = self._msg.root.name
        self._dec[version] = ns[f"_d_{root}"]
        self._enc[version] = ns[f"_e_{root}"]
        return ns

    def source(self, version: int) -> str:
        """Generated Python source for ``version`` (debugging aid)."""
        return _Gen(self._msg, version).generate()["__source__"]

    def decode(self, buf, version: int, offset: int = 0):
        """Decode the body at ``buf[offset:]`` -> ``(message, end_offset)``.

        ``buf`` is bytes/bytearray/memoryview; trailing bytes after the body are allowed.
        Raises :class:`DecodeError` for anything malformed, including an unsupported version.
        """
        fn = self._dec.get(version)
        if fn is None:
            self._compile(version)
            fn = self._dec[version]
        if offset < 0 or offset > len(buf):
            raise DecodeError(f"{self.name} v{version}: offset {offset} outside the buffer")
        try:
            return fn(buf, offset, len(buf))
        except DecodeError as e:
            raise DecodeError(f"{self.name} v{version}: {e}") from None
        except (IndexError, struct.error):
            raise DecodeError(f"{self.name} v{version}: truncated") from None
        except (ValueError, OverflowError) as e:  # UnicodeDecodeError, bad UUID
            raise DecodeError(f"{self.name} v{version}: malformed ({e.__class__.__name__}: {e})") from None

    def _encode_into(self, msg, version: int, b: bytearray, out) -> None:
        fn = self._enc.get(version)
        if fn is None:
            if not self.supports(version):
                raise ValueError(f"{self.name}: unsupported version {version}")
            self._compile(version)
            fn = self._enc[version]
        try:
            fn(msg, b, out)
        except struct.error as e:
            raise ValueError(f"{self.name} v{version}: cannot encode: {e}") from None
        except (AttributeError, TypeError) as e:
            raise ValueError(f"{self.name} v{version}: cannot encode: {e}") from e

    def encode(self, msg, version: int) -> bytes:
        """Encode a message object or a Mapping (snake_case keys) at ``version`` -> bytes.

        Fields absent in ``version`` are skipped; FileRegions in records are read.
        Raises ValueError if a value cannot be encoded.
        """
        b = bytearray()
        self._encode_into(msg, version, b, None)
        return bytes(b)

    def encode_parts(self, msg, version: int) -> list:
        """Like :meth:`encode` but returns ``list[bytes | FileRegion]`` (adjacent bytes merged);
        each :class:`~litemq.protocol.regions.FileRegion` of a ``RecordsParts`` records value is
        its own item, for sendfile."""
        b = bytearray()
        out: list = []
        self._encode_into(msg, version, b, out)
        if b or not out:
            out.append(bytes(b))
        return out

