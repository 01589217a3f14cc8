"""Every snippet and command of README.md and docs/*.md runs as written, on the CPU.

What runs, page by page (docs/journal/ is history and is not run):

* Every fenced ``python`` and ``bash`` block of a page, in the page's order, from one fresh
  directory per page (a reader following the page), holding links to the checkout's ``examples/``
  and ``tools/`` (the scripts the docs run by path) and an empty ``docs/img/`` (where the commands
  that regenerate figures write). A ``python`` block runs as a script, ``__main__`` with fresh
  globals in a process of its own: a forked child of one that has imported torch and swarp
  (``SERVER``; a fresh interpreter would spend ~4 s a block on those imports). A ``bash`` block runs
  command by command (a line with its ``\\`` continuations, or a whole ``for ... done``) through
  ``bash -c``, stopping at the first failure; a ``cd DIR`` line moves the block's later commands, as
  in a shell. CUDA is hidden (``CUDA_VISIBLE_DEVICES=""``), so snippets that pick ``"cuda" if
  torch.cuda.is_available() else "cpu"`` take their CPU branch.
* ``pip install`` commands are checked, not run: the torch pin is CI's (``.ci/run``), every extra
  exists in pyproject.toml, a pinned package is pinned the same there. ``python -m pytest`` without
  a path (the whole suite, which holds this test) is not run either.

The convention, in the docs themselves where a reader sees it (a bash comment line directly above
the command it is about):

* ``# ... add --FLAG VALUE ...``: the command below is sized for a GPU or a long run, and the comment
  says so and ends with the flags of its CPU-sized form; the test appends those flags to that line
  (argparse keeps the last value of a repeated flag, so ``--total-steps 20000`` overrides an earlier
  ``--total-steps 5000000``). Example: ``# sized for a GPU (13 min on a 2-core CPU); on a CPU add
  --total-steps 20000``.
* ``# needs ...``: the command below cannot run here (``# needs 8 GPUs``, ``# needs two nodes``); the
  test does not run it and reports the comment as the reason (``test_command_not_run``, shown in
  pytest's summary of skips).
* A ``python`` block whose first line is ``# excerpt of PATH`` is a piece of a file an earlier block
  wrote (a method of the scenario template): the test checks that its lines stand, in order and
  together, in that file (indentation aside) instead of running it.

Inline commands in the prose (a ``python -m MODULE ...``, ``python path.py ...`` or ``torchrun ...``
code span) are checked without running them (``test_inline_commands_parse``): the module or script
exists, and where the span holds no placeholder (``<time>``, ``[--flag]``, ``{a,b}``, ``...``, an
upper-case word such as ``N`` or ``ARGS``) its flags parse: the module runs as ``__main__`` with
``ArgumentParser.parse_known_args`` stopped right after a successful parse.

Time: the pages run three at a time (``SWARP_DOCS_WORKERS``), longest first, started together by the
first page test; each test then reports its own page and prints each command's seconds (``-s``).
Each command gets ``OMP_NUM_THREADS`` = cores / pages at a time (at least 1), so the pages running
together do not oversubscribe the cores. The whole file took 3.5 min on the 2-core CI machine kind;
pages over half a minute carry the ``slow`` marker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", *(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md"))))
#: Checkout folders a page's directory links to: the docs run scripts from them by path.
LINKED = ("examples", "tools")
#: Checkout folders a page's directory holds empty: regeneration commands write there.
MADE = ("docs/img",)
#: Wall-clock limit of one command or python block [s]: far above any of them, so only a hang trips it.
COMMAND_TIMEOUT_S = 300
#: Pages run at once.
WORKERS = int(os.environ.get("SWARP_DOCS_WORKERS", "3"))
#: Seconds a page took on the 2-core CPU, three pages at a time (measured): the longest start first, and
#: pages over half a minute carry the ``slow`` marker. Unlisted pages take a few seconds.
PAGE_SECONDS = {
    "docs/training.md": 180,
    "README.md": 135,
    "docs/writing-scenarios.md": 90,
    "docs/scaling.md": 70,
    "docs/results.md": 45,
    "docs/sensors.md": 25,
    "docs/differentiability.md": 10,
}
SLOW_PAGES = tuple(page for page, seconds in PAGE_SECONDS.items() if seconds > 30)

FENCE = re.compile(r"^```(\S*)\s*$")
ADD = re.compile(r"^\s*#.*\badd\s+(--\S.*?)\s*$")
NEEDS = re.compile(r"^\s*#\s*(needs\b.*?)\s*$")
EXCERPT = re.compile(r"^#\s*excerpt of\s+(\S+)")
CD = re.compile(r"^cd\s+(\S+)$")
PLACEHOLDER = re.compile(r"<[^>]*>|\[[^\]]*\]|\{[^}]*\}|\.\.\.|\w\|\w|\(|(?<![\w./-])[A-Z][A-Z_]*(?![\w./-])")


@dataclass(frozen=True)
class Block:
    """A fenced block: its page, the line of its opening fence (1-based), language and text."""

    page: str
    line: int
    lang: str
    text: str


@dataclass
class Command:
    """One command of a bash block, as the test runs it."""

    page: str
    line: int
    text: str
    added: str = ""
    skip: str | None = None
    cwd: str = "."
    checks: list[str] = field(default_factory=list)  # the pip install commands it holds (checked, not run)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def read_blocks(page: str) -> list[Block]:
    """The ``python`` and ``bash`` blocks of ``page`` (a path relative to the checkout)."""
    lines = (ROOT / page).read_text().splitlines()
    blocks, start, lang = [], None, ""
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if match is None:
            continue
        if start is None:
            start, lang = number, match.group(1)
        else:
            if lang in ("python", "bash"):
                blocks.append(Block(page, start, lang, "\n".join(lines[start : number - 1])))
            start = None
    return blocks


def split_comment(line: str) -> tuple[str, str]:
    """``line`` -> (code, trailing comment) at the first ``#`` outside quotes that starts a word."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip(), line[index:]
    return line.rstrip(), ""


def complete(text: str) -> bool:
    """Whether ``text`` is a whole shell command (no open loop, quote or ``\\`` continuation)."""
    if text.rstrip().endswith("\\"):
        return False
    return subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).returncode == 0


def bash_commands(block: Block) -> list[Command]:
    """The commands of a bash block, with the ``add`` and ``needs`` comments applied."""
    lines = block.text.splitlines()
    added, needs = {}, {}  # line index -> flags appended to it / the reason its command is not run
    pending_add = pending_needs = None
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            if match := ADD.match(line):
                pending_add = match.group(1)
            elif match := NEEDS.match(line):
                pending_needs = match.group(1)
            continue
        if pending_needs is not None:
            needs[index], pending_needs = pending_needs, None
        if pending_add is not None:
            end = index
            while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
                end += 1  # after the line's continuations
            added[end], pending_add = pending_add, None
    lines = [f"{split_comment(line)[0]} {added[i]}" if i in added else line for i, line in enumerate(lines)]
    commands, cwd, index = [], ".", 0
    while index < len(lines):
        if not lines[index].strip() or lines[index].lstrip().startswith("#"):
            index += 1
            continue
        first = index
        while True:
            index += 1
            if index >= len(lines) or complete("\n".join(lines[first:index])):
                break
        text = "\n".join(lines[first:index])
        if match := CD.match(text.strip()):
            cwd = os.path.normpath(os.path.join(cwd, match.group(1)))
            continue
        flags = " ".join(added[i] for i in range(first, index) if i in added)
        command = Command(block.page, block.line + 1 + first, text, added=flags, skip=needs.get(first), cwd=cwd)
        pieces = [piece.strip() for piece in text.split("&&")]
        command.checks = [piece for piece in pieces if piece.startswith("pip install")]
        rest = [piece for piece in pieces if not piece.startswith("pip install")]
        if command.skip is None and any(whole_test_suite(piece) for piece in rest):
            command.skip = "runs the whole test suite, which holds this test"
        command.text = " && ".join(piece for piece in rest if not whole_test_suite(piece))
        commands.append(command)
    return commands


def whole_test_suite(command: str) -> bool:
    """``python -m pytest`` with no path among its arguments."""
    words = shlex.split(split_comment(command)[0])
    return words[:3] == ["python", "-m", "pytest"] and not any(
        "/" in word or word.endswith(".py") for word in words[3:]
    )


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
ALL_COMMANDS = [command for block in ALL_BLOCKS if block.lang == "bash" for command in bash_commands(block)]


# --- install commands ------------------------------------------------------------------------------


def ci_torch_pin() -> str:
    """The torch version CI installs (``.ci/run``)."""
    return re.search(r"torch==(\S+)", (ROOT / ".ci" / "run").read_text()).group(1)


def check_install(command: str) -> list[str]:
    """What is wrong with a documented ``pip install`` command (empty: nothing)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pinned = {
        requirement.split("==")[0].lower(): requirement.split("==")[1]
        for requirement in [*project["dependencies"], *(r for group in extras.values() for r in group)]
        if "==" in requirement
    }
    problems = []
    words = shlex.split(split_comment(command)[0])
    if words[:2] != ["pip", "install"]:
        return [f"not a pip install command: {command!r}"]
    for word in words[2:]:
        if word == "-e":
            continue
        if word.startswith("."):
            match = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", word)
            unknown = [e for e in (match.group(1).split(",") if match and match.group(1) else []) if e not in extras]
            if match is None or unknown:
                problems.append(f"{word!r}: extras {unknown} are not in pyproject.toml's {sorted(extras)}")
        elif word.lower().startswith("torch=="):
            if word.split("==")[1] != ci_torch_pin():
                problems.append(f"{word!r}: CI installs torch=={ci_torch_pin()} (.ci/run)")
        elif "==" in word:
            name, version = word.split("==")
            if pinned.get(name.lower()) != version:
                problems.append(f"{word!r}: pyproject.toml pins {name}=={pinned.get(name.lower())}")
        else:
            problems.append(f"{word!r}: not a pinned package or the checkout")
    return problems


def test_install_commands_are_the_documented_ones():
    installs = [(command.where, check) for command in ALL_COMMANDS for check in command.checks]
    installs += [(f"{page} (prose)", span) for page, span in inline_spans() if span.startswith("pip install")]
    assert len(installs) >= 3, installs
    problems = [f"{where}: {problem}" for where, text in installs for problem in check_install(text)]
    assert not problems, "\n".join(problems)
    readme = [check for command in ALL_COMMANDS if command.page == "README.md" for check in command.checks]
    test_install = next(check for check in readme if ".[test," in check)
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"{test_install} && python -m pytest -q" in ci, "README's test command is not CI's, verbatim"


# --- running the pages ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What running one block or command gave."""

    where: str
    what: str
    seconds: float
    ok: bool
    output: str = ""


def environment() -> dict[str, str]:
    """The commands' environment: CUDA hidden, the cores shared between the pages running at once."""
    threads = str(max(1, (os.cpu_count() or 1) // WORKERS))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", MPLBACKEND="Agg", PYTHONUNBUFFERED="1", OMP_NUM_THREADS=threads)
    env.pop("PYTHONPATH", None)
    return env


#: A process that has imported torch and swarp once and runs each python block in a forked child of
#: itself (``fork`` after the imports, never after a parallel op): the block runs as ``__main__``
#: from a fresh module namespace, in its own process, as ``python block.py`` would, without paying
#: the ~4 s of imports per block. The child's exit status and output come back as a script's would.
SERVER = r"""
import atexit, json, os, runpy, signal, sys, time, traceback
import torch, swarp

print("ready", flush=True)
for request in sys.stdin:
    script, cwd, log, timeout = json.loads(request)
    pid = os.fork()
    if pid == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = 0
        try:
            os.chdir(cwd)
            sys.argv, sys.path[0] = [script], os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        except SystemExit as error:
            code = error.code if isinstance(error.code, int) else int(error.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline, status = time.monotonic() + timeout, None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.02)
    print(json.dumps(status), flush=True)
"""


class BlockServer:
    """One ``SERVER`` process (one per page-running thread)."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment(), text=True
        )
        assert self.process.stdout.readline().strip() == "ready", "the python block server did not start"

    def run(self, script: Path, cwd: Path, where: str) -> Outcome:
        log = script.with_suffix(".log")
        began = time.perf_counter()
        self.process.stdin.write(json.dumps([str(script), str(cwd), str(log), COMMAND_TIMEOUT_S]) + "\n")
        self.process.stdin.flush()
        status = json.loads(self.process.stdout.readline())
        output = log.read_text() if log.exists() else ""
        if status == "timeout":
            output += f"\n[timed out after {COMMAND_TIMEOUT_S} s]"
        elif status != 0:
            output += f"\n[exit status {status}]"
        return Outcome(where, "python block", time.perf_counter() - began, status == 0, output)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


_servers = threading.local()
_all_servers: list[BlockServer] = []


def block_server() -> BlockServer:
    if getattr(_servers, "server", None) is None:
        _servers.server = BlockServer()
        _all_servers.append(_servers.server)
    return _servers.server


def run(argv: list[str], cwd: Path, where: str, what: str) -> Outcome:
    began = time.perf_counter()
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
        )
        ok, output = done.returncode == 0, done.stdout + done.stderr
        if not ok:
            output += f"\n[exit status {done.returncode}]"
    except subprocess.TimeoutExpired as error:
        ok, output = False, f"{error.stdout or ''}{error.stderr or ''}\n[timed out after {COMMAND_TIMEOUT_S} s]"
    return Outcome(where, what, time.perf_counter() - began, ok, output)


def check_excerpt(block: Block, path: str, workdir: Path) -> Outcome:
    """An ``# excerpt of PATH`` block: its lines stand together, in order, in PATH."""
    began = time.perf_counter()
    wanted = [line.strip() for line in block.text.splitlines()[1:] if line.strip()]
    source = workdir / path
    if not source.is_file():
        return Outcome(f"{block.page}:{block.line}", f"excerpt of {path}", 0.0, False, f"{path}: no such file")
    have = [line.strip() for line in source.read_text().splitlines() if line.strip()]
    found = any(have[i : i + len(wanted)] == wanted for i in range(len(have) - len(wanted) + 1))
    message = "" if found else f"these lines do not stand together in {path}:\n" + "\n".join(wanted)
    return Outcome(f"{block.page}:{block.line}", f"excerpt of {path}", time.perf_counter() - began, found, message)


def run_page(page: str, workdir: Path) -> list[Outcome]:
    """Every block of ``page`` in order, from ``workdir``; stops at the first failure."""
    for name in LINKED:
        (workdir / name).symlink_to(ROOT / name, target_is_directory=True)
    for name in MADE:
        (workdir / name).mkdir(parents=True)
    scripts = workdir.parent / f"{workdir.name}-blocks"
    scripts.mkdir()
    outcomes = []
    for block in read_blocks(page):
        if block.lang == "python":
            if match := EXCERPT.match(block.text):
                outcomes.append(check_excerpt(block, match.group(1), workdir))
            else:
                script = scripts / f"{Path(page).stem}_line{block.line}.py"
                script.write_text(block.text + "\n")
                outcomes.append(block_server().run(script, workdir, f"{page}:{block.line}"))
        else:
            for command in bash_commands(block):
                if command.skip is None and command.text:
                    argv = ["bash", "-o", "pipefail", "-c", command.text]
                    outcomes.append(run(argv, workdir / command.cwd, command.where, command.text))
                    if not outcomes[-1].ok:
                        break
        if outcomes and not outcomes[-1].ok:
            break
    return outcomes


class PageRuns:
    """The selected pages, run ``WORKERS`` at a time from the first request on, longest first."""

    def __init__(self, pages: list[str], root: Path):
        self.root = root
        self.futures: dict[str, Future] = {}
        self.pool = ThreadPoolExecutor(max_workers=WORKERS)
        for page in sorted(pages, key=lambda p: -PAGE_SECONDS.get(p, 0)):
            workdir = root / page.replace("/", "_").removesuffix(".md")
            workdir.mkdir(parents=True)
            self.futures[page] = self.pool.submit(run_page, page, workdir)

    def result(self, page: str) -> list[Outcome]:
        return self.futures[page].result()


RUN_PAGES = [page for page in PAGES if read_blocks(page)]


@pytest.fixture(scope="session")
def page_runs(request, tmp_path_factory) -> PageRuns:
    selected = [item.callspec.params["page"] for item in request.session.items
                if item.originalname == "test_page_runs_as_written"]  # fmt: skip
    runs = PageRuns(selected, tmp_path_factory.mktemp("docs"))
    yield runs
    runs.pool.shutdown(wait=True)
    for server in _all_servers:
        server.close()


@pytest.mark.parametrize(
    "page", [pytest.param(page, marks=[pytest.mark.slow] if page in SLOW_PAGES else []) for page in RUN_PAGES]
)
def test_page_runs_as_written(page, page_runs):
    outcomes = page_runs.result(page)
    for outcome in outcomes:
        print(f"{outcome.seconds:6.1f} s  {'ok  ' if outcome.ok else 'FAIL'}  {outcome.where}  {outcome.what[:100]}")
    print(f"{sum(o.seconds for o in outcomes):6.1f} s  {page}")
    failed = [outcome for outcome in outcomes if not outcome.ok]
    if failed:
        outcome = failed[0]
        pytest.fail(f"{outcome.where}: {outcome.what}\n{textwrap.indent(outcome.output[-6000:], '    ')}")


@pytest.mark.parametrize("where, reason", [(c.where, c.skip) for c in ALL_COMMANDS if c.skip] or [("", "")])
def test_command_not_run(where, reason):
    assert where, "no documented command is left out"
    pytest.skip(f"{where} is not run: {reason}")


# --- inline commands in the prose ------------------------------------------------------------------

SPAN = re.compile(r"`([^`]+)`")
COMMAND_SPAN = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:python|torchrun|pip)\s")


def inline_spans() -> list[tuple[str, str]]:
    """``(page, span)`` for every code span of the prose that is a command."""
    spans = []
    for page in PAGES:
        lines, prose, fenced = (ROOT / page).read_text().splitlines(), [], False
        for line in lines:
            if FENCE.match(line):
                fenced = not fenced
                prose.append("")
            elif not fenced:
                prose.append(line)
        for paragraph in "\n".join(prose).split("\n\n"):
            for match in SPAN.finditer(" ".join(paragraph.split())):
                if COMMAND_SPAN.match(match.group(1)):
                    spans.append((page, match.group(1)))
    return spans


def inline_target(span: str) -> tuple[str, str, list[str]] | None:
    """``("module" | "script", name, arguments)`` of a ``python``/``torchrun`` span; None for others."""
    try:
        words = shlex.split(span)
    except ValueError:
        words = span.split()
    while words and re.fullmatch(r"[A-Z_]+=\S+", words[0]):
        words = words[1:]
    if not words or words[0] not in ("python", "torchrun"):
        return None
    rest = words[1:]
    for index, word in enumerate(rest):
        if word == "-m" and index + 1 < len(rest):
            return "module", rest[index + 1], rest[index + 2 :]
        if word.endswith(".py"):
            return "script", word, rest[index + 1 :]
    return None


#: Runs in a subprocess: for each (kind, name, args, parse) checks existence and, with parse, the flags.
CHECKER = r"""
import argparse, importlib.util, json, re, runpy, sys
from pathlib import Path

class Parsed(Exception):
    pass

original = argparse.ArgumentParser.parse_known_args

def parse_known_args(self, args=None, namespace=None):
    result = original(self, args, namespace)
    if self.add_help:  # the command line's own parser, not a pre-parser of --import
        raise Parsed()
    return result

argparse.ArgumentParser.parse_known_args = parse_known_args
problems = []
for kind, name, args, parse in json.load(sys.stdin):
    names = [name]
    if "{" in name:
        head, options, tail = name.partition("{")[0], name.partition("{")[2].partition("}")[0], name.partition("}")[2]
        names = [head + option + tail for option in options.split(",")]
    for target in names:
        target = target.removesuffix(".*")  # swarp.benchmark.*: the package
        try:
            spec = importlib.util.find_spec(target) if kind == "module" else None
            source = Path(spec.origin if spec else target)
            if spec and spec.submodule_search_locations and (source.parent / "__main__.py").is_file():
                source = source.parent / "__main__.py"
        except ModuleNotFoundError:
            source = None
        if source is None or not source.is_file():
            problems.append(f"{kind} {target}: not found")
            continue
        text = source.read_text()
        forwards = re.search(r"^from swarp[\w.]* import [\w, ]*\bmain\b", text, re.M)  # a thin command module
        if not parse or ("ArgumentParser" not in text and not forwards):  # no command line: never run it
            continue
        sys.argv = [target, *args]
        try:
            if kind == "module":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
            problems.append(f"{target} {' '.join(args)}: ran without parsing a command line")
        except Parsed:
            pass
        except SystemExit as error:
            problems.append(f"{target} {' '.join(args)}: the command line does not parse (exit {error.code})")
        except Exception as error:
            problems.append(f"{target} {' '.join(args)}: {type(error).__name__}: {error}")
print(json.dumps(problems))
"""


def test_inline_commands_parse(tmp_path):
    checks = []
    for _page, span in inline_spans():
        target = inline_target(span)
        if target is not None:
            kind, name, args = target
            concrete = bool(args) and PLACEHOLDER.search(" ".join(args)) is None and "{" not in name
            checks.append((kind, name, args, concrete and name != "pytest"))  # pytest would run the tests
    assert len(checks) > 20, checks
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    # The scenario docs/writing-scenarios.md has the reader write, which spans with --import dispersion2 load.
    from swarp.scenario import write_scenario

    write_scenario("dispersion2", tmp_path)
    print(f"{sum(c[3] for c in checks)} inline commands parsed, {sum(not c[3] for c in checks)} found only")
    done = subprocess.run(
        [sys.executable, "-c", CHECKER],
        input=json.dumps(checks),
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    problems = json.loads(done.stdout.strip().splitlines()[-1])
    assert not problems, "\n".join(problems)


def test_scenarios_page_lists_every_scenario():
    """docs/scenarios.md's first table names every registered built-in scenario."""
    import swarp

    text = (ROOT / "docs" / "scenarios.md").read_text()
    table = text[text.index("| scenario | task |") :].split("\n\n")[0]
    listed = re.findall(r"^\| \[(\w+)\]", table, flags=re.MULTILINE)
    assert listed and sorted(listed) == swarp.scenario_names(), (listed, swarp.scenario_names())


def test_the_convention_reads_as_documented():
    """``add`` and ``needs`` comments, continuations, loops, ``cd`` and install checks, on a made-up block."""
    text = "\n".join([
        "pip install torch==9.9 -e \".[viz]\" && python -m swarp.demo",
        "# sized for a GPU; on a CPU add --total-steps 20000",
        "python -m swarp.train navigation --total-steps 5000000   # a comment",
        "# needs 8 GPUs",
        "torchrun --nproc-per-node 8 x.py \\",
        "    --flag",
        "cd sub",
        "for seed in 0 1; do",
        "  # for a quick look add --episodes 4",
        "  python x.py --seed $seed",
        "done",
        "python -m pytest -q",
    ])  # fmt: skip
    commands = bash_commands(Block("page.md", 10, "bash", text))
    assert [c.line for c in commands] == [11, 13, 15, 18, 22]
    assert commands[0].text == "python -m swarp.demo" and commands[0].checks == ['pip install torch==9.9 -e ".[viz]"']
    assert commands[1].text == "python -m swarp.train navigation --total-steps 5000000 --total-steps 20000"
    assert commands[2].skip == "needs 8 GPUs" and commands[2].cwd == "."
    assert commands[3].cwd == "sub" and "python x.py --seed $seed --episodes 4\ndone" in commands[3].text
    assert commands[4].skip.startswith("runs the whole test suite")
    assert check_install(commands[0].checks[0]) == [f"'torch==9.9': CI installs torch=={ci_torch_pin()} (.ci/run)"]
    assert check_install('pip install -e ".[viz,nope]"')[0].startswith("'.[viz,nope]': extras ['nope']")
    assert inline_target("OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m swarp.train navigation") == (
        "module", "swarp.train", ["navigation"]
    )  # fmt: skip
    assert PLACEHOLDER.search("runs/navigation__0__<time>/checkpoint.pt") and not PLACEHOLDER.search("--seeds 0 1 2")
