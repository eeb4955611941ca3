"""One line describing the machine a benchmark ran on (every report states it)."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or ``"?"`` where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def describe_machine() -> str:
    """``"Linux 6.x, 2 CPUs (AMD EPYC), 23.5 GiB RAM, Python 3.11.7"``."""
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu_model()}), "
            f"{mem_gib:.1f} GiB RAM, Python {platform.python_version()}")
