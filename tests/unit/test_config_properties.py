"""The properties reader against java.util.Properties: expected values below were produced by Java 17,
and one test replays every case through a real JVM (Java is a project requirement for Spark)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from jproperties import ParseError, Properties

from mirrorflow.config import ConfigError
from mirrorflow.config.properties import load_properties, parse_properties

CASES: dict[str, tuple[str, dict[str, str] | None]] = {
    "full-line comments only": (
        "# hash comment\n! bang comment\n   # indented comment\na=1 # not a comment\nb=2 ! not either\n",
        {"a": "1 # not a comment", "b": "2 ! not either"},
    ),
    "separators": (
        "eq=1\ncolon:2\nspace 3\ntab\t4\n  padded   =   5   \nfirst=a=b\nsecond:=c\nbare\n",
        {
            "eq": "1",
            "colon": "2",
            "space": "3",
            "tab": "4",
            "padded": "5   ",
            "first": "a=b",
            "second": "=c",
            "bare": "",
        },
    ),
    "continuations": (
        "list = one, \\\n       two, \\\n   three\nkeycont\\\n  inued = x\nhash = a\\\n  # b\n"
        "blank = x\\\n\nafter = y\neof = z\\",
        {
            "list": "one, two, three",
            "keycontinued": "x",
            "hash": "a# b",
            "blank": "x",
            "after": "y",
            "eof": "z",
        },
    ),
    "escapes": (
        "t = a\\tb\\nc\\rd\\fe\nother = \\q\\z\\:\\=\\#\\!\nbs = c:\\\\temp\\\\x\nkey\\ with\\ spaces = v\n\\#notcomment = 1\n",
        {
            "t": "a\tb\nc\rd\fe",
            "other": "qz:=#!",
            "bs": "c:\\temp\\x",
            "key with spaces": "v",
            "#notcomment": "1",
        },
    ),
    "unicode escapes": (
        "cafe = caf\\u00e9\n\\u0041->\\u0042.enabled = true\nemoji = \\uD83D\\uDE00\nraw = grüße\n",
        {"cafe": "café", "A->B.enabled": "true", "emoji": "😀", "raw": "grüße"},
    ),
    "arrows in keys": (
        "A->B.enabled = true\nA -> B.enabled = spaced\nA->B.topics: x, y\n",
        {"A->B.enabled": "true", "A": "-> B.enabled = spaced", "A->B.topics": "x, y"},
    ),
    "last duplicate wins": ("k = 1\nk = 2\n", {"k": "2"}),
    "comments that look like jproperties metadata": ("#:\n#: = 1\n!: foo\n#:key=value\na = 1\n", {"a": "1"}),
    "line endings": (
        "crlf = 1\r\nnext = 2\r\ncr = 3\rlast = 4 \\\r\n  cont\r\n",
        {"crlf": "1", "next": "2", "cr": "3", "last": "4 cont"},
    ),
    "malformed unicode escape": ("a = \\u00zz\n", None),
    "truncated unicode escape": ("a = \\u12", None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reader_matches_java_properties(name: str) -> None:
    text, expected = CASES[name]
    if expected is None:
        with pytest.raises(ConfigError) as info:
            parse_properties(text, "mm2.properties")
        assert info.value.problems[0].key.startswith("mm2.properties:")
        assert "\\u" in info.value.problems[0].fix
    else:
        assert parse_properties(text).values == expected


def test_plain_jproperties_rejects_comments_java_accepts() -> None:
    """The reason for the reader's comment override: jproperties alone fails where Java does not."""
    with pytest.raises(ParseError):
        Properties().load("#:\na = 1\n")
    assert parse_properties("#:\na = 1\n").values == {"a": "1"}


def test_duplicate_keys_are_reported_as_warnings() -> None:
    result = parse_properties("clusters = a\nclusters = a, b\n")
    assert result.values == {"clusters": "a, b"}
    assert [(p.key, p.severity.value) for p in result.problems] == [("clusters", "warning")]


def test_utf8_bom_and_latin1_files(tmp_path: Path) -> None:
    bom = tmp_path / "bom.properties"
    bom.write_bytes(b"\xef\xbb\xbfclusters = a\n")
    assert load_properties(bom).values == {"clusters": "a"}
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name = caf\xe9\n".encode("iso-8859-1"))
    assert load_properties(latin1).values == {"name": "café"}


def test_path_or_text(tmp_path: Path) -> None:
    file = tmp_path / "mm2.properties"
    file.write_text("clusters = a\n")
    assert load_properties(file).source == str(file)
    assert load_properties(str(file)).values == {"clusters": "a"}
    assert load_properties("clusters = b").values == {"clusters": "b"}
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_properties(str(tmp_path / "missing.properties"))


_JAVA_DUMP = """
import java.io.*;
import java.nio.file.*;
import java.util.*;

public class Dump {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String arg : args) {
            Properties p = new Properties();
            try (Reader r = Files.newBufferedReader(Paths.get(arg), java.nio.charset.StandardCharsets.UTF_8)) {
                p.load(r);
            } catch (IllegalArgumentException e) {
                out.append("ERROR\\n");
                continue;
            }
            TreeMap<String, String> sorted = new TreeMap<>();
            for (String k : p.stringPropertyNames()) sorted.put(k, p.getProperty(k));
            for (Map.Entry<String, String> e : sorted.entrySet()) {
                out.append(hex(e.getKey())).append(' ').append(hex(e.getValue())).append(' ');
            }
            out.append("\\n");
        }
        System.out.print(out);
    }
    static String hex(String s) {
        StringBuilder b = new StringBuilder("x");
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
}
"""


def _utf16_hex(text: str) -> str:
    data = text.encode("utf-16-be", "surrogatepass")
    return "x" + data.hex()


def test_cases_replayed_through_a_real_jvm(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java, "Java 17+ is a project requirement (make setup installs it); put java on PATH"
    source = tmp_path / "Dump.java"
    source.write_text(_JAVA_DUMP)
    files = []
    for index, (text, _) in enumerate(CASES.values()):
        file = tmp_path / f"case{index}.properties"
        file.write_bytes(text.encode("utf-8"))
        files.append(str(file))
    result = subprocess.run(
        [java, str(source), *files], capture_output=True, text=True, timeout=120, check=True
    )
    java_lines = result.stdout.split("\n")[: len(files)]
    for (name, (text, _)), line in zip(CASES.items(), java_lines, strict=True):
        try:
            ours = parse_properties(text).values
        except ConfigError:
            assert line == "ERROR", name
            continue
        expected = " ".join(
            f"{_utf16_hex(k)} {_utf16_hex(v)}"
            for k, v in sorted(ours.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
        )
        assert line.strip() == expected, name
