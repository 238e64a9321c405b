"""Writing user-named files: nothing clobbered that the user did not mean, nothing half-written."""

from __future__ import annotations

import os
import stat

import pytest

from ortop.errors import UsageError
from ortop.fsutil import atomic_write_text, check_writable, write_text


def test_regular_file_replaced_atomically_with_ordinary_permissions(tmp_path):
    target = tmp_path / "out.json"
    write_text(target, "one\n")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    target.chmod(0o640)
    write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # a replaced file keeps its mode
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left behind


def test_symlink_writes_its_target_and_stays_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_character_device_is_written_through_not_replaced():
    write_text("/dev/null", "x" * 100)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    with pytest.raises(UsageError, match="/dev/full"):
        write_text("/dev/full", "x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_text(fifo, "hello\n")
        assert os.read(r, 100) == b"hello\n"
    finally:
        os.close(r)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_missing_folder_is_an_error_not_created(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        write_text(tmp_path / "no" / "such" / "out.json", "x")
    assert not (tmp_path / "no").exists()
    atomic_write_text(tmp_path / "state" / "last.toml", "x")  # ortop's own folders are made
    assert (tmp_path / "state" / "last.toml").read_text() == "x"


def test_protected_files_refused_however_spelled(tmp_path, monkeypatch):
    model = tmp_path / "victim.onnx"
    model.write_bytes(b"model")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alias.onnx").symlink_to(model)
    for spelling in ("victim.onnx", "./victim.onnx", str(model), "alias.onnx"):
        with pytest.raises(UsageError, match="ortop is using"):
            check_writable(spelling, protect=[str(model)], what="summary")
    assert model.read_bytes() == b"model"


def test_directory_and_unwritable_refused(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        write_text(tmp_path, "x")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(UsageError, match="no permission"):
            check_writable(ro / "out.json")
