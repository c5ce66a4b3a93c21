"""The Contents-API commands: upload, download, ls, rm, success and failure."""

from __future__ import annotations

import stat

from .conftest import Emu


def test_upload_ls_download_rm_round_trip(emu: Emu) -> None:
    ep = emu.new("job1")
    local = emu.write("job.sh", "echo hi\n")
    local.chmod(0o755)
    assert emu.run("upload", "-s", "job1", "job.sh", "/content/job.sh") == (
        0,
        "[colab] Uploaded 'job.sh' to '/content/job.sh'\n",
        "",
    )
    remote = emu.content(ep) / "job.sh"
    assert remote.read_text() == "echo hi\n"
    assert stat.S_IMODE(remote.stat().st_mode) == 0o644, "permissions are not kept"
    (emu.content(ep) / "logs").mkdir()
    (emu.content(ep) / ".hidden").write_text("x")
    assert emu.run("ls", "-s", "job1") == (0, "logs/\nsample_data/\njob.sh\n", "")
    assert emu.run("ls", "-s", "job1", "/content/job.sh") == (0, "job.sh\n", "")
    rc, out, _ = emu.run("download", "-s", "job1", "content/job.sh", "back.sh")
    assert (rc, out) == (0, "[colab] Downloaded 'content/job.sh' to 'back.sh'\n")
    assert (emu.workdir / "back.sh").read_text() == "echo hi\n"
    assert emu.run("rm", "-s", "job1", "/content/job.sh") == (
        0,
        "[colab] Deleted /content/job.sh\n",
        "",
    )
    assert not remote.exists()


def test_file_command_failures(emu: Emu) -> None:
    ep = emu.new("job1")
    (emu.content(ep) / "dir").mkdir()
    (emu.content(ep) / "dir" / "f").write_text("x")
    cases = [
        (
            ("upload", "-s", "job1", "missing.sh", "/content/x"),
            "[colab] Local file 'missing.sh' not found.\n",
        ),
        (
            ("download", "-s", "job1", "/content/nope", "x"),
            "[colab] Download failed: File or directory not found: /content/nope\n",
        ),
        (
            ("download", "-s", "job1", "/content/dir", "x"),
            "[colab] Download failed: Cannot download a directory: /content/dir\n",
        ),
        (
            ("ls", "-s", "job1", "/content/nope"),
            "[colab] Error: File or directory not found: /content/nope\n",
        ),
        (
            ("rm", "-s", "job1", "/content/nope"),
            "[colab] Error: File or directory not found: /content/nope\n",
        ),
        (("rm", "-s", "job1", "/content/dir"), "[colab] Error: Directory /content/dir not empty\n"),
        (
            ("ls", "-s", "job1", "../../.."),
            "[colab] Error: File or directory not found: ../../..\n",
        ),
    ]
    for argv, line in cases:
        assert emu.run(*argv) == (1, line, ""), argv


def test_upload_to_a_missing_folder_fails_like_the_contents_api(emu: Emu) -> None:
    emu.new("job1")
    emu.write("a.txt", "a")
    rc, out, _ = emu.run("upload", "-s", "job1", "a.txt", "/content/no/such/dir/a.txt")
    assert rc == 1
    assert out.startswith("[colab] Upload failed: 500 Server Error")


def test_file_commands_on_a_vanished_vm(emu: Emu) -> None:
    ep = emu.new("job1")
    emu.write("a.txt", "a")
    emu.admin("unassign", ep)
    rc, out, _ = emu.run("upload", "-s", "job1", "a.txt", "/content/a.txt")
    assert rc == 1 and out.startswith("[colab] Upload failed: 404 Client Error: Not Found")
    assert emu.run("ls", "-s", "job1") == (
        1,
        "[colab] Error: File or directory not found: content\n",
        "",
    )
