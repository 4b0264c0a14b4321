"""The embedded engine's build (app/llm/engine.py, app/llm/cpu.py): instruction sets
chosen from the CPU's flags (never AMX), a smoke run before a binary is installed with a
fall-back to more portable flag sets, a stamp that knows the CPU, and one clear error when
the server dies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import app.llm.engine as engine
from app.errors import ServiceError, UserError
from app.llm.cpu import Cpu, flag_sets, parse_cpu_flags
from app.llm.models import require_model
from app.settings import ENGINE_X86_OPTIONS, Settings
from tests.conftest import ROOT, assert_user_error, run_cli

AMX_XEON = (
    "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 bmi1 bmi2 fma f16c avx512f avx512dq avx512cd "
    "avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg "
    "avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_int8 amx_bf16"
)
HASWELL = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 bmi1 bmi2 fma f16c"
SANDY_BRIDGE = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx"
X86 = {"amx xeon": AMX_XEON, "haswell": HASWELL, "sandy bridge": SANDY_BRIDGE, "none": ""}
FAKE_SERVER = ROOT / "tests" / "fake_llama_server.py"


def _cpu(flags: str, machine: str = "x86_64") -> Cpu:
    return Cpu(machine, frozenset(flags.split()))


def test_cpu_flags_are_read_from_cpuinfo() -> None:
    cpuinfo = "processor\t: 0\nmodel name\t: Xeon\nflags\t\t: fpu avx2 amx_tile\n\nflags\t: other\n"
    assert parse_cpu_flags(cpuinfo) == {"fpu", "avx2", "amx_tile"}
    assert parse_cpu_flags("Features\t: fp asimd dotprod\n") == {"fp", "asimd", "dotprod"}
    assert parse_cpu_flags("") == frozenset()


@pytest.mark.parametrize("cpu_name", list(X86))
def test_x86_flag_sets_never_turn_on_amx_or_what_the_cpu_lacks(cpu_name: str) -> None:
    cpu = _cpu(X86[cpu_name])
    sets = flag_sets(cpu)
    assert sets[-1].name == "x86-64" and sets[-1].enabled == []
    for flag_set in sets:
        options = dict(flag_set.options)
        assert options["GGML_NATIVE"] is False  # never -march=native on x86
        assert not any(on for opt, on in options.items() if "AMX" in opt)
        assert {"GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"} <= set(options)
        for opt, needs in ENGINE_X86_OPTIONS:
            if options[opt]:
                assert cpu.flags.issuperset(needs), (cpu_name, opt)
    assert len({s.cmake_flags for s in sets}) == len(sets)


def test_the_amx_xeon_gets_avx512_without_amx_and_haswell_no_avx512() -> None:
    xeon = flag_sets(_cpu(AMX_XEON))
    assert [s.name for s in xeon] == ["cpu", "avx2", "x86-64"]
    assert {"AVX512", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI"} <= set(xeon[0].enabled)
    haswell = flag_sets(_cpu(HASWELL))
    assert [s.name for s in haswell] == ["avx2", "x86-64"]  # all it has is the baseline
    assert haswell[0].enabled == ["SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C"]
    assert [s.name for s in flag_sets(_cpu(SANDY_BRIDGE))] == ["cpu", "x86-64"]
    assert [s.name for s in flag_sets(_cpu(""))] == ["x86-64"]


def test_other_architectures_prove_the_native_build_then_fall_back() -> None:
    sets = flag_sets(_cpu("fp asimd dotprod", machine="aarch64"))
    assert [(s.name, dict(s.options)["GGML_NATIVE"]) for s in sets] == [
        ("native", True),
        ("portable", False),
    ]


def test_the_cpu_key_ignores_flags_no_build_depends_on() -> None:
    a = _cpu(HASWELL + " hypervisor tsc_known_freq")
    assert a.key() == _cpu(HASWELL).key() != _cpu(HASWELL + " avx512f").key()
    assert "amx_tile" in _cpu(AMX_XEON).key()["flags"]  # an AMX CPU is another CPU


def test_exit_reasons_name_the_signal() -> None:
    assert engine.exit_reason(-11) == "was killed by SIGSEGV (signal 11)"
    assert engine.exit_reason(128 + 4) == "was killed by SIGILL (signal 4)"  # via the wrapper
    assert engine.exit_reason(1) == "exited with code 1"


# -- Builds, stamps and smoke runs with fake engines --------------------------------------


def _crashing_engine(path: Path) -> Path:
    """An engine that loads, then dies as the AMX build did: SIGSEGV."""
    path.write_text(
        "#!/bin/sh\necho 'load_tensors: loaded the model'\n"
        "echo 'ggml_backend_amx_mul_mat: ldtilecfg'\nkill -SEGV $$\n"
    )
    path.chmod(0o755)
    return path


def _working_engine(path: Path) -> Path:
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SERVER}" "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_model(tmp_path: Path) -> Path:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not read by the fake engines")
    return model


def _install(home: Path, binary: Path, cpu: Cpu) -> Settings:
    settings = Settings(home=home)
    engine.install(binary, settings, flag_sets(cpu)[0], cpu)
    return settings


def test_a_stamp_from_other_sources_or_flags_does_not_count(tmp_path: Path) -> None:
    settings = _install(tmp_path, _working_engine(tmp_path / "bin"), Cpu.here())
    assert engine.is_built(settings) and engine.runs_here(settings)
    stamp_path = engine._stamp_path(engine.engine_path(settings))
    current = json.loads(stamp_path.read_text())
    for changed in ({"sdist": "llama-cpp-python==0.3.1"}, {"cmake_flags": ["-DGGML_NATIVE=ON"]}):
        stamp_path.write_text(json.dumps({**current, **changed}))
        assert not engine.is_built(settings)
    old_format = {k: current[k] for k in ("sdist", "cmake_flags")}  # before flag sets
    stamp_path.write_text(json.dumps(old_format))
    assert not engine.is_built(settings)


def test_a_build_from_another_cpu_is_smoke_run_before_use(tmp_path: Path, fake_model: Path) -> None:
    """A home copied from another machine: the binary runs here, so it is kept and this CPU
    recorded; one that crashes here is refused with the rebuild command, not started."""
    here = Cpu.here().key()  # this machine may be the AMX Xeon itself
    other = next(cpu for cpu in map(_cpu, X86.values()) if cpu.key() != here)
    settings = _install(tmp_path / "works", _working_engine(tmp_path / "w"), other)
    assert engine.is_built(settings) and not engine.runs_here(settings)
    assert engine.require_engine(settings, fake_model) == engine.engine_path(settings)
    assert engine.runs_here(settings)
    stamp = engine.read_stamp(settings)
    assert stamp is not None and stamp["built_for"] == other.key()

    settings = _install(tmp_path / "crashes", _crashing_engine(tmp_path / "c"), other)
    with pytest.raises(ServiceError, match="SIGSEGV") as info:
        engine.require_engine(settings, fake_model)
    assert "built on another CPU" in info.value.message
    assert "hoprag llm build --force" in info.value.hint
    assert not engine.runs_here(settings)


@contextmanager
def _no_sources(settings: Settings, log: Path) -> Iterator[Path]:
    yield settings.home / "src" / "llama.cpp"


def test_a_build_that_dies_in_its_smoke_run_falls_back_and_says_why(
    tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The best flag set's binary crashes (SIGSEGV, like AMX did): it is not installed, the
    next set's is, and the report names the set kept and why the first was turned down."""
    compiled: list[str] = []

    def fake_compile(source: Path, out: Path, flag_set, log: Path, *, progress: bool) -> Path:
        compiled.append(flag_set.name)
        out.mkdir(parents=True, exist_ok=True)
        binary = out / "llama-server"
        return _crashing_engine(binary) if len(compiled) == 1 else _working_engine(binary)

    monkeypatch.setattr(engine, "sources", _no_sources)
    monkeypatch.setattr(engine, "compile_server", fake_compile)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    settings = Settings(home=tmp_path / "home")
    notes: list[str] = []
    report = engine.build(settings, fake_model, progress=False, notify=notes.append)
    expected = [s.name for s in flag_sets(Cpu.here())][:2]
    assert compiled == expected and report.flag_set == expected[1] and report.compiled
    assert report.rejected[0][0] == expected[0] and "SIGSEGV" in report.rejected[0][1]
    assert "ggml_backend_amx_mul_mat" in report.rejected[0][1]  # the log's last lines
    assert f"flag set '{expected[1]}'" in report.summary() and "turned down" in report.summary()
    assert any("failed its smoke run" in note for note in notes)
    stamp = engine.read_stamp(settings)
    assert stamp is not None and stamp["flag_set"] == expected[1]
    assert stamp["runs_on"] == [Cpu.here().key()]
    assert "kill -SEGV" not in engine.engine_path(settings).read_text()

    # Built and proven: a second build compiles nothing; --force compiles again.
    compiled.clear()
    assert not engine.build(settings, fake_model, progress=False).compiled and compiled == []
    engine.build(settings, fake_model, progress=False, force=True)
    assert compiled == expected


def test_no_flag_set_that_runs_is_one_clear_error(
    tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crashing_compile(source: Path, out: Path, flag_set, log: Path, *, progress: bool) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        return _crashing_engine(out / "llama-server")

    monkeypatch.setattr(engine, "sources", _no_sources)
    monkeypatch.setattr(engine, "compile_server", crashing_compile)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    settings = Settings(home=tmp_path)
    with pytest.raises(ServiceError, match="no build of llama-server passed") as info:
        engine.build(settings, fake_model, progress=False, notify=lambda _: None)
    assert "x86-64" in info.value.message or "portable" in info.value.message
    assert not engine.is_built(settings)


def test_a_missing_engine_is_a_clear_error(tmp_path: Path, fake_model: Path) -> None:
    with pytest.raises(UserError, match="not built") as info:
        engine.require_engine(Settings(home=tmp_path), fake_model)
    assert "hoprag llm build" in info.value.hint


def _home_with_engine(tmp: Path, real: Settings, binary: Path) -> Path:
    """A HOPRAG_HOME with the real models and indexes but `binary` as its engine."""
    home = tmp / "home"
    (home / "models").mkdir(parents=True)
    for entry in real.models_dir.iterdir():
        if entry.name != "engine":
            (home / "models" / entry.name).symlink_to(entry)
    (home / "indexes").symlink_to(real.indexes_dir, target_is_directory=True)
    _install(home, binary, Cpu.here())
    return home


def test_ask_against_a_server_that_dies_is_one_clear_error(
    tmp_path: Path, settings: Settings, sample_index: str
) -> None:
    """How the server ended (the signal), its log's last lines and path, what to do; not
    the endpoint-garbage message it used to give."""
    home = _home_with_engine(tmp_path, settings, _crashing_engine(tmp_path / "engine"))
    proc = run_cli("ask", "Where is Tavistrom College?", "--index", sample_index, home=home)
    assert_user_error(
        proc, "was killed by SIGSEGV", "ggml_backend_amx_mul_mat", "llm-server-", "--force"
    )
    assert "not an OpenAI chat completion" not in proc.stderr


# -- The real engine ---------------------------------------------------------------------


def test_the_installed_engine_is_proven_here_and_not_rebuilt(settings: Settings) -> None:
    """`make setup` built and smoke-ran it; `hoprag llm build` then finds it and compiles
    nothing."""
    assert engine.runs_here(settings)
    proc = run_cli("llm", "build", home=settings.home)
    assert proc.returncode == 0, proc.stderr
    assert "is built" in proc.stderr and "compiling" not in proc.stderr


@pytest.mark.e2e
def test_the_installed_engine_passes_the_smoke_run_and_holds_no_amx(settings: Settings) -> None:
    binary = engine.engine_path(settings)
    log = settings.home / "logs" / "test-smoke.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    assert engine.smoke_run(binary, require_model(settings), log).strip()
    stamp = engine.read_stamp(settings)
    assert stamp is not None
    assert not [flag for flag in stamp["isa_flags"] if "AMX" in flag and flag.endswith("=ON")]
    if Cpu.here().is_x86:
        objdump = shutil.which("objdump")
        assert objdump, "objdump (binutils) is needed to inspect the engine"
        code = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(binary)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "ldtilecfg" not in code and "tdpbssd" not in code
        # ... while the instruction sets it did turn on are in: AVX-512 VNNI's dot product
        assert "vpdpbusd" in code or "-DGGML_AVX512_VNNI=ON" not in stamp["isa_flags"]
