"""No silent overwrite: a folder holding a run with other arguments (its ``run.json``) is refused unless
``--overwrite``, with or without ``--cache``; the same arguments again resume."""

from __future__ import annotations

import contextlib
import io
import json

from coalition_gym.cli import main

EVAL = ["eval", "--pool", "sim:demo", "--protocol", "majority_vote", "--estimator", "loo", "--bootstrap", "50"]


def call(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def items_in(folder) -> int:
    return json.loads((folder / "summary.json").read_text())["n_items"]


def test_a_run_with_other_arguments_is_refused_even_with_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert call(EVAL + ["--items", "40", "--cache", "c", "--out", "out"])[0] == 0
    before = (tmp_path / "out" / "summary.json").read_text()
    code, out, err = call(EVAL + ["--items", "20", "--cache", "c", "--out", "out"])
    assert code == 2 and out == ""
    assert "--out out holds a run with other arguments (--items 40 there, 20 here)" in err
    assert "--overwrite" in err
    assert (tmp_path / "out" / "summary.json").read_text() == before  # the 40-item result is kept
    code, _, err = call(EVAL + ["--items", "20", "--out", "out"])  # and without --cache
    assert code == 2 and "holds a run with other arguments" in err


def test_the_same_arguments_resume_and_overwrite_replaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert call(EVAL + ["--items", "30", "--cache", "c", "--out", "out"])[0] == 0
    code, out, _ = call(EVAL + ["--items", "30", "--cache", "c", "--out", "out"])
    assert code == 0 and "0 generations" in out  # everything came from the cache
    code, _, _ = call(EVAL + ["--items", "20", "--out", "out", "--overwrite"])
    assert code == 0 and items_in(tmp_path / "out") == 20


def test_a_folder_of_other_files_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    code, _, err = call(EVAL + ["--items", "10", "--cache", "c", "--out", "out"])
    assert code == 2 and "holds files that are not a cgym run record" in err
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_a_record_without_arguments_is_compared_by_its_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert call(EVAL + ["--items", "10", "--out", "out"])[0] == 0
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    del record["arguments"]  # as written before run.json recorded them
    (tmp_path / "out" / "run.json").write_text(json.dumps(record))
    assert call(EVAL + ["--items", "10", "--out", "out"])[0] == 0
    code, _, err = call(EVAL + ["--items", "12", "--out", "out"])
    assert code == 2 and "--items 10 there, 12 here" in err


def test_train_refuses_a_run_folder_of_another_configuration_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train = ["train", "--method", "base", "--policy", "zoo:tiny/pico", "--task", "zoo:arith", "--steps", "1"]
    from coalition_gym.training.config import make_config

    config = make_config("base", preset="tiny", strict=False, policies=["zoo:tiny/pico"], task="zoo:reverse")
    run_folder = tmp_path / "runs" / "train" / "base-seed0"
    run_folder.mkdir(parents=True)
    (run_folder / "config.json").write_text(json.dumps(config.to_dict()))
    (run_folder / "per_item.json").write_text("{}")
    code, _, err = call(train)
    assert code == 2 and "runs/train/base-seed0 holds a base run with another configuration (" in err, err
    assert (run_folder / "per_item.json").is_file()  # nothing was touched
    assert not (tmp_path / "runs" / "train" / "run.json").exists()


def test_train_refuses_a_folder_holding_another_commands_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert call(EVAL + ["--items", "20", "--out", "out"])[0] == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    train = ["train", "--method", "base", "--policy", "zoo:tiny/pico", "--task", "zoo:arith", "--steps", "1"]
    code, out, err = call(train + ["--out", "out"])
    assert code == 2 and out == "" and "--out out holds a `cgym eval` run" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before  # the eval is untouched
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "notes.txt").write_text("mine")
    code, _, err = call(train + ["--out", "loose"])
    assert code == 2 and "holds files that are not training runs (notes.txt)" in err
    assert call(EVAL + ["--items", "20", "--out", "out"])[0] == 0  # the eval still resumes there


def test_a_write_that_fails_mid_run_is_one_line_with_what_was_kept(tmp_path, monkeypatch):
    import errno

    import coalition_gym.result_files as result_files

    def disk_full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(result_files, "write_json", disk_full)
    code, _, err = call(EVAL + ["--items", "10", "--cache", "c", "--out", "out"])
    lines = [line for line in err.splitlines() if line.startswith("cgym:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "No space left on device (out/summary.json)" in lines[0]
    assert "finished generations are kept in --cache c" in lines[0]
