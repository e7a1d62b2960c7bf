import os

import pytest

from ngrp_lib.artifacts import jsonl
from ngrp_lib.errors import InputError, OutputError, OutputExistsError


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def kinds(path):
    return [(r.line, getattr(r, "kind", "row")) for r in jsonl.iter_records(path)]


def test_rows_blank_lines_and_line_numbers(tmp_path):
    p = write(tmp_path / "a.jsonl", b'{"a":1}\n\n  \n{"a":2}\n')
    assert kinds(p) == [(1, "row"), (2, jsonl.BLANK), (3, jsonl.BLANK), (4, "row")]
    assert [r.data["a"] for r in jsonl.iter_rows(p)] == [1, 2]
    with pytest.raises(InputError) as err:
        list(jsonl.iter_rows(p, allow_blank=False))
    assert err.value.line == 2 and err.value.exit_code == 3


def test_torn_tail_vs_unterminated_row(tmp_path):
    torn = write(tmp_path / "t.jsonl", b'{"a":1}\n{"a":')
    assert kinds(torn) == [(1, "row"), (2, jsonl.TORN)]
    assert jsonl.tail_state(torn) == "torn"
    ok = write(tmp_path / "u.jsonl", b'{"a":1}\n{"a":2}')
    assert kinds(ok) == [(1, "row"), (2, "row")]
    assert jsonl.tail_state(ok) == "unterminated"


def test_problem_kinds(tmp_path):
    p = write(tmp_path / "p.jsonl", b'{"a":NaN}\n{"a":\xff}\n[1,2]\n{oops}\n{"a":Infinity}\n')
    assert kinds(p) == [
        (1, jsonl.NON_FINITE),
        (2, jsonl.INVALID_UTF8),
        (3, jsonl.NOT_OBJECT),
        (4, jsonl.INVALID_JSON),
        (5, jsonl.NON_FINITE),
    ]


def test_crlf_and_long_lines(tmp_path):
    big = "x" * 5_000_000
    p = write(tmp_path / "c.jsonl", b'{"a":1}\r\n' + (f'{{"b":"{big}"}}\n').encode())
    rows = list(jsonl.iter_rows(p))
    assert rows[0].data == {"a": 1} and len(rows[1].data["b"]) == 5_000_000


def test_repair_tail(tmp_path):
    torn = write(tmp_path / "t.jsonl", b'{"a":1}\n{"a":')
    assert jsonl.repair_tail(torn) == "truncated 5 bytes"
    assert torn.read_bytes() == b'{"a":1}\n'
    unterminated = write(tmp_path / "u.jsonl", b'{"a":1}')
    assert jsonl.repair_tail(unterminated) == "terminated"
    assert unterminated.read_bytes() == b'{"a":1}\n'
    assert jsonl.repair_tail(unterminated) == "clean"
    assert jsonl.repair_tail(tmp_path / "absent.jsonl") == "clean"


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        list(jsonl.iter_rows(tmp_path / "nope.jsonl"))
    assert "nope.jsonl" in str(err.value)


def test_atomic_write_refuses_overwrite_and_keeps_old(tmp_path):
    out = tmp_path / "o.jsonl"
    assert jsonl.write_jsonl(out, [{"a": 1}]) == 1
    with pytest.raises(OutputExistsError):
        jsonl.write_jsonl(out, [{"a": 2}])
    assert out.read_bytes() == b'{"a":1}\n'

    def boom():
        yield {"a": 3}
        raise RuntimeError("fail mid-write")

    with pytest.raises(RuntimeError):
        jsonl.write_jsonl(out, boom(), overwrite=True)
    assert out.read_bytes() == b'{"a":1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["o.jsonl"]  # no temp file left
    jsonl.write_jsonl(out, [{"a": float("nan")}], overwrite=True)
    assert out.read_bytes() == b'{"a":null}\n'


def test_appender_flushes_each_row(tmp_path):
    out = tmp_path / "sub" / "r.jsonl"
    with jsonl.Appender(out) as app:
        app.write({"a": 1})
        assert out.read_bytes() == b'{"a":1}\n'  # visible before close
    assert os.path.getsize(out) == 8


def test_nan_inside_a_string_on_a_broken_line_is_invalid_json_not_non_finite(tmp_path):
    p = write(tmp_path / "n.jsonl", b'{"a": "NaN", oops}\n{"a": [1, -Infinity]}\n{"b": "NaN"}\n')
    assert kinds(p) == [(1, jsonl.INVALID_JSON), (2, jsonl.NON_FINITE), (3, "row")]
    assert "-Infinity" in list(jsonl.iter_records(p))[1].message


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_outputs_get_the_umask_mode_not_mkstemps_0600(tmp_path, umask, expected):
    """Profiles written on a shared run folder must be as readable as the rollouts next to them."""
    old = os.umask(umask)
    try:
        out = tmp_path / "summary.json"
        jsonl.write_json(out, {"a": 1})
        assert out.stat().st_mode & 0o777 == expected
        out.chmod(0o640)  # --overwrite keeps the mode the user gave the file, never wider than the umask's
        jsonl.write_json(out, {"a": 2}, overwrite=True)
        assert out.stat().st_mode & 0o777 == 0o640 & expected
    finally:
        os.umask(old)


def test_a_folder_in_place_of_an_output_is_an_unwritable_output(tmp_path):
    """Exit 3 (a file that cannot be written), as the README says, not 2."""
    (tmp_path / "b.json").mkdir()
    targets = {"a": tmp_path / "a.json", "b": tmp_path / "b.json"}
    outputs = jsonl.atomic_outputs(targets, overwrite=True)
    with pytest.raises(OutputError, match="is a folder"), outputs as out:
        out["a"].write(b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]  # nothing written, no temp file
