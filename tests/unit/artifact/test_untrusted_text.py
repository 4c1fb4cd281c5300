"""Messages and listings that quote text prepflow did not write (issue 48, item 5).

A name in a manifest, metadata or feature spec, a file name on the command line, the content of a file:
whoever made them chose them. What ``prepflow`` prints of them is cut to a bounded length and carries no
character a terminal acts on (ESC, CR, LF, other C0/C1 controls, bidi overrides), so a crafted artifact can
neither drive the terminal, fake a line such as ``verified: ...``, nor fill the screen with a file's
content; a damaged JSON file or an over-long file name is one ``prepflow: error:`` line naming it.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import MESSAGE_LIMIT, QUOTE_LIMIT, DataError, IntegrityError, PrepflowError, quoted, shown
from prepflow import Artifact
from tests.artifact_crafting import copy, edit_json, publish, sign
from tests.cli_inprocess import ERROR, runner

FAKE_LINE = "verified: 20 files match manifest.json"
HOSTILE = "\x1b[2K\r\n" + FAKE_LINE  # erase the line, start a new one that looks like prepflow's own
BIDI = "\u202e"  # right-to-left override: "gnp.exe" reads as "exe.png"
SECRET = "AWS_SECRET_ACCESS_KEY=" + "s3cr3t" * 4


def terminal_controls(text: str) -> set[str]:
    """Characters of ``text`` a terminal acts on or reorders (C0/C1 controls but LF, DEL, format characters)."""
    return {c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return publish(tmp_path_factory.mktemp("made"))


@pytest.fixture
def art(made, tmp_path) -> Path:
    return copy(made, tmp_path)


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


# ---- the helpers ---------------------------------------------------------------------------------------

@given(st.text(), st.integers(min_value=1, max_value=400))
def test_shown_text_has_no_terminal_control_and_a_bounded_length(text, limit):
    out = shown(text, limit)
    assert out.isprintable(), out
    assert len(out) <= 10 * limit + 40  # an escape is at most 10 characters (\U0010ffff)
    if text.isprintable() and len(text) <= limit:
        assert out == text


@given(st.text())
def test_quoted_is_repr_when_short_and_cut_when_long(text):
    out = quoted(text)
    assert out.isprintable()
    assert out == repr(text) if len(text) <= QUOTE_LIMIT else out.startswith(repr(text[:QUOTE_LIMIT]))


def test_every_control_the_issue_names_is_escaped():
    for char in ("\x1b", "\r", "\n", "\x07", "\x7f", "\x85", "\x9b", BIDI, "\u2066"):
        assert char not in shown(f"a{char}b") and char not in quoted(f"a{char}b")


def test_an_error_message_is_bounded_and_survives_pickling():
    import pickle

    error = IntegrityError("x" * (50 * MESSAGE_LIMIT))
    assert len(str(error)) < MESSAGE_LIMIT + 100
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


@given(st.text(max_size=200), st.text(max_size=200))
def test_an_error_message_keeps_its_lines_and_escapes_everything_else(name, other):
    message = str(DataError(f"feature '{name}': bad\n  second line '{other}'"))
    assert all(line.isprintable() for line in message.split("\n")), message
    # a line break is the message's own (a name quoted raw keeps its own: quoted() escapes those too)
    assert message.count("\n") == 1 + name.count("\n") + other.count("\n")


# ---- inspect -------------------------------------------------------------------------------------------

def test_plain_inspect_escapes_every_name_the_artifact_gives(art, prepflow):
    def hostile_manifest(m):
        m["created_at"] = "\x1b[31mred" + HOSTILE
        m["prepflow_version"] = BIDI + "gnp.exe"

    def hostile_metadata(m):
        m["Age"]["column"] = "Age\x1b]0;title\x07" + HOSTILE

    edit_json(art, "manifest.json", hostile_manifest)
    edit_json(art, "training_set_metadata.json", hostile_metadata)
    for args in (("inspect", art), ("inspect", "--verify", art)):
        result = prepflow(*args)
        assert result.code == 0, result.text
        assert not terminal_controls(result.out), result.out
        assert result.out.count(FAKE_LINE) == (1 if "--verify" in args else 0) + 2  # the two escaped in lines
        assert not any(line.startswith(FAKE_LINE) for line in result.out.splitlines()[:-1]), result.out
        assert "\\x1b[31mred" in result.out and "\\u202egnp.exe" in result.out


def test_an_artifact_id_cannot_fake_the_verified_line(art, prepflow):
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id=m["artifact_id"] + HOSTILE))
    result = prepflow("inspect", art)  # refused by the id check, or listed with the id escaped
    assert not terminal_controls(result.text), result.text
    assert not any(line.startswith(FAKE_LINE) for line in result.text.splitlines()), result.text


# ---- damaged files, long names, file content -------------------------------------------------------------

@pytest.mark.parametrize("command", ["inspect", "report"])
@pytest.mark.parametrize("content", [b'{"Age": ', b"[1, 2]", b"\xff\xfe not utf-8"])
def test_damaged_metadata_json_is_one_line_naming_the_file(art, prepflow, command, content):
    (art / "training_set_metadata.json").write_bytes(content)
    sign(art, "training_set_metadata.json")
    result = prepflow(command, art)
    assert result.code == 1, result.text
    assert len(result.error_lines()) == 1, result.text
    line = result.error_lines()[0]
    assert "internal error" not in line and "training_set_metadata.json" in line, line
    assert "expected every feature's fitted metadata, a JSON object" in line, line


def test_damaged_metadata_json_is_a_typed_error_in_python(art):
    (art / "training_set_metadata.json").write_text("{")
    sign(art, "training_set_metadata.json")
    with pytest.raises(IntegrityError, match="training_set_metadata.json: not valid JSON"):
        _ = Artifact.open(art).metadata


@pytest.mark.parametrize("command", ["inspect", "report"])
def test_a_file_name_too_long_is_one_line(prepflow, tmp_path, command):
    name = tmp_path / ("a" * 256)
    result = prepflow(command, name)
    assert result.code == 1, result.text
    assert len(result.error_lines()) == 1 and "internal error" not in result.text, result.text
    line = result.error_lines()[0]
    assert "file name too long" in line and "256 bytes" in line, line
    assert len(line) < 2 * QUOTE_LIMIT + 200, line


def test_latest_holding_a_huge_file_never_prints_its_content(made, tmp_path, prepflow):
    root = tmp_path / "out"
    copy(made, root)
    (root / "LATEST").write_text(SECRET + "\x1b[2K" + "x" * 20_000_000)
    result = prepflow("inspect", root)
    assert result.code == 1 and len(result.error_lines()) == 1, result.text[:2000]
    assert len(result.err) < 2000 and not terminal_controls(result.err), result.err[:2000]
    with pytest.raises(PrepflowError) as info:
        Artifact.open(root)
    assert len(str(info.value)) < 2000


def test_a_huge_file_name_in_the_manifest_is_quoted_cut(art, prepflow):
    def listing(m):
        m["files"]["../" + "x" * 5_000_000 + "\x1b[2K"] = {"sha256": "0" * 64, "bytes": 1}

    edit_json(art, "manifest.json", listing)
    result = prepflow("inspect", art)
    assert result.code == 1 and len(result.error_lines()) == 1, result.text[:2000]
    assert len(result.err) < 2000 and not terminal_controls(result.err), result.err[:2000]
    assert "more characters" in result.err


def test_an_internal_error_quotes_its_message_cut_and_escaped(prepflow, monkeypatch):
    from flows import cli

    def boom(_args):
        raise ValueError("\x1b[2J" + "y" * 1_000_000)

    monkeypatch.setitem(cli.COMMANDS, "boom", (lambda p: None, boom))
    result = prepflow("boom")
    assert result.code == 1 and len(result.error_lines()) == 1
    assert len(result.err) < 2000 and not terminal_controls(result.err), result.err[:2000]
    assert result.error_lines()[0].startswith(f"{ERROR} internal error: ValueError: \\x1b[2J")


def test_every_error_line_is_escaped_whatever_raised_it(prepflow, monkeypatch):
    from core.errors import DataError
    from flows import cli

    def boom(_args):  # a message built without quoted(): the CLI still escapes what it prints
        raise DataError("feature 'x\x1b[2K\x9b" + BIDI + "': bad")

    monkeypatch.setitem(cli.COMMANDS, "boom", (lambda p: None, boom))
    result = prepflow("boom")
    assert result.code == 1 and not terminal_controls(result.err), result.err


# ---- what the data gives: gate failures and warnings ------------------------------------------------------

def test_a_gate_failure_quotes_the_datas_names_and_values_cut_and_escaped(capsys):
    from expectations.report import describe_failure
    from flows.reporting import print_validation

    huge = "\x1b[2J" + "v" * 1_000_000
    result = {"expectation_type": "expect_column_values_to_be_in_set", "success": False,
              "kwargs": {"column": "col\x1b[31m" + BIDI},
              "result": {"unexpected_count": 1, "element_count": 3, "partial_unexpected_list": [huge],
                         "partial_unexpected_index_list": [2]}}
    line = describe_failure(result, "raw")
    assert not terminal_controls(line) and len(line) < 1000, line[:1000]
    assert "'col\\x1b[31m\\u202e'" in line and "more characters" in line
    gate = {"gate": "raw", "success": False, "on_failure": "fail", "config": "c.yaml", "evaluated": 1, "failed": 1,
            "rows": 3, "suites": [{"source": "generated", "results": [result]}]}
    print_validation({"dataset": "d.csv", "gates": [gate], "success": False})
    out = capsys.readouterr().out
    assert not terminal_controls(out) and len(out) < 2000, out[:2000]


def test_warnings_are_printed_escaped(capsys):
    from flows.console import print_warnings

    print_warnings(["drift: col\x1b[2K\r" + FAKE_LINE + "\x9b" + BIDI])
    out = capsys.readouterr().out
    assert not terminal_controls(out) and len(out.splitlines()) == 2, out
