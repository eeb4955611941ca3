"""Online log template mining (Drain, via drain3) with per-format settings and checkpointable state.

A streaming job keeps one :class:`TemplateMiner` per log source, feeds it each line's
``ParsedLine.message`` and gets back ``(template_id, template, is_new)``. Between micro-batches
it stores :meth:`TemplateMiner.state` (``bytes``) in its checkpointed state and rebuilds the
miner with :meth:`TemplateMiner.from_state`, so template ids are stable across restarts.

Per-format settings (:data:`PROFILES`): Drain tree depth, similarity threshold and the
masking regexes applied before tokenising. They start from the per-dataset settings of the
Drain benchmark in logpai/logparser (``benchmark/Drain_benchmark.py``, MIT licence; the
settings behind the Zhu et al. ICSE-SEIP 2019 figures) and add generic masks (IPs, block ids,
hex, UUIDs, numbers). Masks are written ``<NAME>``; Drain's own wildcard is ``<*>``.
Grouping accuracy per system is measured by ``python -m litemq.pipeline.accuracy``.
"""

from __future__ import annotations

import json
import zlib
import re
from dataclasses import asdict, dataclass, field, replace

import jsonpickle
from drain3 import TemplateMiner as _Drain3Miner
from drain3.masking import MaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig

__all__ = ["BENCHMARK_PROFILES", "PROFILES", "Profile", "TemplateMiner", "make_config"]

# Generic masks (order matters: the most specific first).
_UUID = (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "UUID")
_BLK = (r"blk_-?\d+", "BLK")
_IP = (r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?(?![\w.])", "IP")
_HEX = (r"\b0[xX][0-9a-fA-F]+\b", "HEX")
_NUM = (r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])", "NUM")


@dataclass(frozen=True)
class Profile:
    """Drain settings for one format.

    Attributes:
        depth: drain3 tree depth (>= 3; ``depth - 2`` leading tokens route the parse tree).
        sim_th: similarity threshold in [0, 1] for joining an existing template.
        masks: ``(regex, name)`` pairs applied in order; a match becomes ``<name>``.
        wildcard: write every mask as Drain's ``<*>`` instead of ``<name>`` (as the loghub
            benchmark's preprocessing did; changes similarity scores, see docs/log-parsing.md).
        drop: regexes whose matches are replaced by one space before masking (optional
            decorations that would otherwise change the token count of the same event).
    """

    depth: int = 4
    sim_th: float = 0.5
    masks: tuple[tuple[str, str], ...] = field(default=(_UUID, _IP, _HEX, _NUM))
    wildcard: bool = False
    drop: tuple[str, ...] = ()


_NAME = (r"(?:[\w-]+\.){2,}[\w-]+", "NAME")

#: The per-dataset settings of the Drain benchmark in logpai/logparser (depth, st, regexes),
#: plus our generic number mask where it had none. Used for the "benchmark settings" GA column.
BENCHMARK_PROFILES: dict[str, Profile] = {
    "hdfs": Profile(4, 0.5, (_BLK, _IP, _NUM)),
    "hadoop": Profile(4, 0.5, (_IP, _NUM)),
    "spark": Profile(4, 0.5, (_IP, (r"\b[KGTM]?B\b", "UNIT"), _NAME, _NUM)),
    "zookeeper": Profile(4, 0.5, ((r"/?(?:\d+\.){3}\d+(?::\d+)?", "IP"), _NUM)),
    "bgl": Profile(4, 0.5, ((r"core\.\d+", "CORE"), _NUM)),
    "hpc": Profile(4, 0.5, ((r"(?<==)\d+", "NUM"), _NUM)),
    "thunderbird": Profile(4, 0.5, (_IP, _NUM)),
    "windows": Profile(5, 0.7, ((r"0x\S*", "HEX"), _NUM)),
    "linux": Profile(6, 0.39, (_IP, (r"\d{2}:\d{2}:\d{2}", "TIME"), _NUM)),
    "android": Profile(6, 0.2, ((r"(?:/[\w-]+)+", "PATH"), _NAME,
                                (r"\b-?\+?\d+\b|\b0[Xx][a-fA-F\d]+\b|\b[a-fA-F\d]{4,}\b", "NUM"))),
    "healthapp": Profile(4, 0.2, (_NUM,)),
    "apache_error": Profile(4, 0.5, (_IP, _NUM)),
    "proxifier": Profile(3, 0.6, ((r"<\d+\ssec", "TIME"),
                                  (r"(?:[\w-]+\.)+[\w-]+(?::\d+)?", "HOST"),
                                  (r"\d{2}:\d{2}(?::\d{2})*", "TIME"), (r"[KGTM]B", "UNIT"),
                                  _NUM)),
    "openssh": Profile(5, 0.6, (_IP, _NAME, _NUM)),
    "openstack": Profile(5, 0.5, ((r"(?:(?:\d+\.){3}\d+,?)+", "IP"), (r"/\S+", "PATH"),
                                  _NUM)),
    "mac": Profile(6, 0.7, (_NAME, _NUM)),
}

_B = BENCHMARK_PROFILES
_PKG = (r"(?<!\S)[a-z0-9][\w.+-]*:(?:amd64|arm64|armhf|armel|i386|ppc64el|s390x|riscv64|mips64el|all)(?!\S)", "PKG")
_VER = (r"(?<![\S(])(?:<none>|\(?\d[\w.+~:-]*\)?)(?![\S)])", "VER")
_PATH = (r"(?<!\S)(?:\.\.\.)?/[^\s]*", "PATH")
PROFILES: dict[str, Profile] = {
    "default": Profile(),
    "apache_access": Profile(4, 0.5),
    **_B,
    # depth/sim_th re-tuned on the loghub 2k samples (in-sample: see docs/log-parsing.md)
    "hadoop": replace(_B["hadoop"], depth=5, sim_th=0.6),
    "zookeeper": replace(_B["zookeeper"], depth=6, sim_th=0.7),
    "bgl": replace(_B["bgl"], depth=6),
    "hpc": replace(_B["hpc"], depth=6, wildcard=True),
    "thunderbird": replace(_B["thunderbird"], depth=5),
    "android": replace(_B["android"], sim_th=0.7),
    "healthapp": replace(_B["healthapp"], depth=6, sim_th=0.8),
    "proxifier": replace(_B["proxifier"], sim_th=0.9,
                         drop=(r"\s\([\d.]+\s*[KMGT]?B\)(?=\s)",)),
    "openssh": replace(_B["openssh"], sim_th=0.8),
    "openstack": replace(_B["openstack"], depth=6, sim_th=0.7),
    "mac": replace(_B["mac"], depth=3, sim_th=0.8),
    # Debian machine logs (not in the benchmark): package names and versions are parameters
    "dpkg": Profile(4, 0.5, (_PKG, _VER, _PATH, _NUM)),
    "alternatives": Profile(4, 0.5, (_PATH, _NUM)),
    "apt_history": Profile(4, 0.5, (_PKG, _VER, _NUM)),
    "syslog_iso": _B["linux"],
    "apt_term": Profile(4, 0.5, (_PKG, (r"\.\.\./[\w.+~-]+\.deb", "DEB"), _PATH, _VER, _NUM)),
}
"""Drain settings per format name (``litemq.pipeline.formats.FORMATS`` keys); unknown formats
use ``"default"``."""


def make_config(profile: str | Profile = "default") -> TemplateMinerConfig:
    """A drain3 ``TemplateMinerConfig`` for a format name (``PROFILES[name]``, unknown names
    get ``"default"``) or a :class:`Profile`.

    Profiling and snapshotting are off; ``parametrize_numeric_tokens`` is on (tokens with
    digits do not route in the Drain tree, as in the original Drain).
    """
    prof = profile if isinstance(profile, Profile) else PROFILES.get(profile, PROFILES["default"])
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    cfg.drain_depth = prof.depth
    cfg.drain_sim_th = prof.sim_th
    cfg.masking_instructions = [MaskingInstruction(rx, "*" if prof.wildcard else name)
                                for rx, name in prof.masks]
    cfg.parametrize_numeric_tokens = True
    return cfg


class TemplateMiner:
    """Online template miner for one log source.

    Args:
        fmt: the source's format name, selecting :data:`PROFILES` (``"default"`` if unknown).
        profile: a :class:`Profile` overriding ``PROFILES[fmt]``.
        config: a drain3 ``TemplateMinerConfig`` overriding the profile's Drain settings
            entirely (the profile's ``drop`` regexes still apply).

    Memory grows with the number of templates (set ``config.drain_max_clusters`` to bound it;
    an evicted template gets a new id when seen again). Not thread-safe. Picklable (pickling
    goes through :meth:`state`).
    """

    _STATE_VERSION = 1

    def __init__(self, fmt: str = "default", *, profile: Profile | None = None,
                 config: TemplateMinerConfig | None = None):
        self.fmt = fmt
        self.profile = profile if profile is not None else PROFILES.get(fmt, PROFILES["default"])
        self._custom_profile = profile is not None
        self._custom_config = config is not None
        self._drop = [re.compile(rx) for rx in self.profile.drop]
        self._miner = _Drain3Miner(config=config if config is not None else make_config(self.profile))

    def add(self, message: str) -> tuple[int, str, bool]:
        """Add one message (the content part of a line, ``ParsedLine.message``).

        Returns ``(template_id, template, is_new)``: ``template_id`` is a positive ``int``,
        stable for the miner's life and across :meth:`state`/:meth:`from_state`; ``template``
        is the cluster's template *after* this message (it can generalise later, the id stays);
        ``is_new`` is ``True`` when this message created the template.
        """
        for rx in self._drop:
            message = rx.sub(" ", message)
        r = self._miner.add_log_message(message)
        return r["cluster_id"], r["template_mined"], r["change_type"] == "cluster_created"

    def templates(self) -> dict[int, str]:
        """All templates mined so far: ``{template_id: template}``."""
        return {c.cluster_id: c.get_template() for c in self._miner.drain.clusters}

    def __len__(self) -> int:
        return len(self._miner.drain.clusters)

    # -- checkpointing ------------------------------------------------------------------------

    def state(self) -> bytes:
        """The miner's full state (format, settings, Drain tree) as zlib-compressed JSON bytes.

        Only load states you wrote: :meth:`from_state` uses jsonpickle, which can build
        arbitrary objects.
        """
        doc = {
            "v": self._STATE_VERSION,
            "fmt": self.fmt,
            "profile": asdict(self.profile) if self._custom_profile else None,
            "config": jsonpickle.dumps(self._miner.config) if self._custom_config else None,
            "drain": jsonpickle.dumps(self._miner.drain, keys=True),
        }
        return zlib.compress(json.dumps(doc).encode("utf-8"), 6)

    @classmethod
    def from_state(cls, state: bytes) -> "TemplateMiner":
        """Rebuild a miner from :meth:`state` bytes.

        Raises:
            ValueError: ``state`` is not a state written by this class (or a newer version).
        """
        try:
            doc = json.loads(zlib.decompress(state))
        except (zlib.error, ValueError, TypeError) as e:
            raise ValueError(f"not a TemplateMiner state: {e}") from e
        if not isinstance(doc, dict) or doc.get("v") != cls._STATE_VERSION:
            raise ValueError("unsupported TemplateMiner state version")
        prof = doc.get("profile")
        profile = None
        if prof:
            prof["masks"] = tuple(tuple(m) for m in prof["masks"])
            prof["drop"] = tuple(prof["drop"])
            profile = Profile(**prof)
        config = jsonpickle.loads(doc["config"]) if doc["config"] else None
        m = cls(doc["fmt"], profile=profile, config=config)
        loaded = jsonpickle.loads(doc["drain"], keys=True)
        d = m._miner.drain
        d.id_to_cluster = loaded.id_to_cluster
        d.clusters_counter = loaded.clusters_counter
        d.root_node = loaded.root_node
        return m

    def __getstate__(self) -> bytes:
        return self.state()

    def __setstate__(self, st: bytes) -> None:
        self.__dict__.update(TemplateMiner.from_state(st).__dict__)
