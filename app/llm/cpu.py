"""Which instruction sets the embedded engine is compiled for, chosen from the CPU's flags.

On x86 each of ggml's instruction-set options is turned on when the CPU reports every flag
it needs, never by `-march=native`, and AMX never: its ggml kernels fault on CPUs that
report it (llama.cpp issue 20824). Each CPU gets a ladder of flag sets, best first; the
engine's build installs the first whose binary passes a smoke run (app/llm/engine.py).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.settings import ENGINE_AVX2_BASELINE, ENGINE_X86_NEVER, ENGINE_X86_OPTIONS

_X86 = frozenset({"x86_64", "amd64", "i386", "i686"})
# The CPU flags that decide which x86 builds can run (AMX's too: a CPU that reports it
# is another CPU for the stamp, although no build turns it on).
_X86_RELEVANT = frozenset(
    {flag for _, needs in ENGINE_X86_OPTIONS for flag in needs}
    | {"amx_tile", "amx_int8", "amx_bf16"}
)


@dataclass(frozen=True)
class Cpu:
    """What a build depends on: the architecture and the CPU's instruction-set flags."""

    machine: str
    flags: frozenset[str]

    @classmethod
    def here(cls) -> Cpu:
        machine = platform.machine().lower()
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:  # not Linux: no flags, so only the portable build is chosen
            cpuinfo = ""
        return cls(machine, parse_cpu_flags(cpuinfo))

    @property
    def is_x86(self) -> bool:
        return self.machine in _X86

    def key(self) -> dict[str, Any]:
        """The stamp's record of this CPU: the flags that decide which builds run."""
        flags = self.flags & _X86_RELEVANT if self.is_x86 else self.flags
        return {"machine": self.machine, "flags": sorted(flags)}


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first `flags` (x86) or `Features` (Arm) line of /proc/cpuinfo."""
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() in {"flags", "features"}:
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class FlagSet:
    """One way to compile ggml's CPU backend: a name and its CMake options."""

    name: str
    options: tuple[tuple[str, bool], ...]
    about: str

    @property
    def cmake_flags(self) -> tuple[str, ...]:
        return tuple(f"-D{opt}={'ON' if on else 'OFF'}" for opt, on in self.options)

    @property
    def enabled(self) -> list[str]:
        return [opt.removeprefix("GGML_") for opt, on in self.options if on]

    def describe(self) -> str:
        on = " ".join(self.enabled) or "none"
        return f"'{self.name}' ({self.about}; instruction sets: {on})"


# The compiler's own tuning for the CPU it runs on (`-march=native`): hoprag's default
# before issue 50 on every CPU, now only where the x86 choice below does not apply.
NATIVE = FlagSet("native", (("GGML_NATIVE", True),), "tuned for the build CPU by the compiler")


def _x86_set(name: str, turned_on: set[str], about: str) -> FlagSet:
    options = [("GGML_NATIVE", False)]
    options += [(opt, opt in turned_on) for opt, _ in ENGINE_X86_OPTIONS]
    options += [(opt, False) for opt in ENGINE_X86_NEVER]
    return FlagSet(name, tuple(options), about)


def flag_sets(cpu: Cpu) -> list[FlagSet]:
    """The flag sets to try, best first; the first whose build passes its smoke run wins.

    x86: what this CPU reports (AMX left off), then the AVX2 baseline, then plain x86-64.
    Other architectures: the compiler's tuning for this CPU, proven by the smoke run, then
    the architecture's baseline."""
    if not cpu.is_x86:
        return [NATIVE, FlagSet("portable", (("GGML_NATIVE", False),), f"any {cpu.machine} CPU")]
    reported = {opt for opt, needs in ENGINE_X86_OPTIONS if cpu.flags.issuperset(needs)}
    candidates = [_x86_set("cpu", reported, "what this CPU reports, AMX left off")]
    if set(ENGINE_AVX2_BASELINE) <= reported:
        candidates.append(_x86_set("avx2", set(ENGINE_AVX2_BASELINE), "the AVX2 baseline"))
    candidates.append(_x86_set("x86-64", set(), "any x86-64 CPU"))
    unique: dict[tuple[str, ...], FlagSet] = {}
    for flag_set in candidates:  # a CPU with just the baseline: named for the baseline
        unique[flag_set.cmake_flags] = flag_set
    return list(unique.values())
