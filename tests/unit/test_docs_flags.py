"""The flags the README and the hand-written documentation pages name are the commands' own:
every `--flag` written after `colabq <command>` (in a code block or in inline code) is an option
of that command (or of `colabq` itself), and every other `--flag` they name in inline code is an
option of some command, or one of the other programs' flags listed here."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ops.docsgen.cli_page import command_paths, options_of, root_options

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Flags of programs other than colabq that the pages name outside a `colabq ...` command: uv,
# timeout, docker compose, redis-server, the colab CLI and its emulator, Flower, the bench's
# table and the chaos suite, and Slurm's (the mapping table).
OTHERS = {
    "--frozen", "--no-sync", "--kill-after", "--scale", "--profile", "--sentinel",
    "--replicaof", "--tpu", "--auth", "--logtostderr", "--home", "--util", "--memory-used",
    "--basic-auth", "--only", "--runs", "--quick",
    "--gres", "--time", "--array", "--dependency", "--requeue", "--chdir", "--mail-type",
}  # fmt: skip
_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1"}


@cache
def known() -> dict[str, set[str]]:
    return {path[0]: options_of(path) for path in command_paths()}


def fragments(text: str) -> list[str]:
    """Each code block's commands (a `\\` continuation joined) and each inline code span."""
    found: list[str] = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
        found += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```[^\n]*\n.*?```", "", text, flags=re.S)
    found += re.findall(r"`([^`\n]+)`", prose)
    return found


def _flag(token: str) -> str | None:
    name = token.strip("[](),.:;'\"").split("=")[0]
    return name if re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-zA-Z]", name) else None


def commands_and_flags(fragment: str) -> list[tuple[str, str]]:
    """(command, flag) for each flag written after `colabq <command>` in `fragment`; the
    command is "" for a flag of `colabq` itself."""
    tokens = fragment.split()
    pairs: list[tuple[str, str]] = []
    for i, token in enumerate(tokens):
        if token != "colabq" and not token.endswith("/colabq"):
            continue
        command = ""
        for word in tokens[i + 1 :]:
            if word in _STOP or word.startswith("#"):
                break
            flag = _flag(word)
            if flag:
                pairs.append((command, flag))
            elif not command and word in known():
                command = word
            elif not command and not pairs:
                break  # "colabq" in a sentence, not a command line
    return pairs


def problems(fragment: str) -> list[str]:
    found = []
    for command, flag in commands_and_flags(fragment):
        allowed = known()[command] if command else root_options()
        if flag not in allowed and flag not in root_options():
            found.append(f"colabq {command} has no {flag}: {fragment.strip()}")
    return found


def test_every_flag_after_a_command_is_that_command_s() -> None:
    checked, wrong = 0, []
    for source in SOURCES:
        for fragment in fragments(source.read_text()):
            checked += len(commands_and_flags(fragment))
            wrong += [f"{source.relative_to(ROOT)}: {p}" for p in problems(fragment)]
    assert not wrong, "\n".join(wrong)
    assert checked > 100


def test_every_other_flag_they_name_is_some_command_s() -> None:
    every = set().union(*known().values(), root_options())
    wrong = []
    for source in SOURCES:
        prose = re.sub(r"```[^\n]*\n.*?```", "", source.read_text(), flags=re.S)
        for span in re.findall(r"`([^`\n]+)`", prose):
            if not span.split() or "colabq" in span.split():
                continue  # empty, or checked against its command above
            first = _flag(span.split()[0])
            if first and first.startswith("--") and first not in every | OTHERS:
                wrong.append(f"{source.relative_to(ROOT)}: `{span}`")
    assert not wrong, "\n".join(wrong)


def test_the_check_reports_a_flag_its_command_lacks() -> None:
    assert problems("colabq status --state live --mine") == []
    assert problems("colabq --env-file .env submit job.yaml --dry-run") == []
    assert problems("colabq logs -f 3f2a | tail") == []
    assert problems("colabq status --follow") == [
        "colabq status has no --follow: colabq status --follow"
    ]
    assert problems("colabq quota [--user alice] [--units-hour 3]") == [
        "colabq quota has no --units-hour: colabq quota [--user alice] [--units-hour 3]"
    ]
