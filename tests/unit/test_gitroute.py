"""How a `code: git` job's remote is reached: an ssh remote over https where the host holds a
credential for its host, else with the deploy key, else not at all (one line naming both ways and
a snapshot); what a worker publishes of its credentials (host names, never a secret) and what is
trusted of a card read back; the known hosts colabq ships, pinned to the forges' fingerprints."""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from pathlib import Path

import pytest

from worker.records.fleet import WorkerCard, _card
from worker.session.gitroute import (
    KNOWN_HOSTS,
    GitRoute,
    NoGitRoute,
    Reach,
    can_fetch,
    credential_hosts,
    fetchers,
    reach_of,
    route,
    ssh_command,
    ssh_remote,
)


@pytest.mark.parametrize(
    ("remote", "host", "https"),
    [
        ("git@github.com:org/repo.git", "github.com", "https://github.com/org/repo.git"),
        ("ssh://git@github.com/org/repo.git", "github.com", "https://github.com/org/repo.git"),
        ("ssh://git@GitLab.example.com:2222/grp/sub/r.git", "gitlab.example.com",
         "https://gitlab.example.com/grp/sub/r.git"),
        ("deploy@git.corp.example:/srv/git/r.git", "git.corp.example",
         "https://git.corp.example/srv/git/r.git"),
        ("git@git.corp.example:~alice/r.git", "git.corp.example", None),  # only ssh names ~
        ("GIT@GitHub.COM:Org/Repo.git", "github.com", "https://github.com/Org/Repo.git"),
    ],
)  # fmt: skip
def test_an_ssh_remote_maps_to_its_https_url(remote: str, host: str, https: str | None) -> None:
    found = ssh_remote(remote)
    assert found is not None and found.host == host and found.https_url == https


@pytest.mark.parametrize(
    "remote",
    ["https://github.com/org/repo.git", "http://127.0.0.1:8080/r", "file:///srv/r.git",
     "/srv/git/r.git", "git://github.com/org/repo.git"],
)  # fmt: skip
def test_other_remotes_are_not_ssh_remotes_and_go_as_they_are(remote: str, tmp_path: Path) -> None:
    assert ssh_remote(remote) is None
    assert route(remote, None, None) == GitRoute(remote)
    creds = tmp_path / "c"
    assert route(remote, creds, tmp_path / "key") == GitRoute(remote, creds)  # no key for https
    assert can_fetch(Reach(), remote)


def test_credential_hosts_are_the_https_lines_hosts_and_nothing_secret(tmp_path: Path) -> None:
    creds = tmp_path / "git-credentials"
    creds.write_text(
        "https://x-access-token:ghp_SECRET1@GitHub.com\n"
        "https://oauth2:glpat-SECRET2@gitlab.example.com:8443/group\n"
        "http://u:SECRET3@plain.example\n"  # a mapped ssh remote is always fetched over https
        "not a url at all\n\n"
    )
    assert credential_hosts(creds) == ("github.com", "gitlab.example.com")
    assert credential_hosts(tmp_path / "missing") == () and credential_hosts(None) == ()
    reach = reach_of(creds, tmp_path / "key")
    assert reach == Reach(("github.com", "gitlab.example.com"), True)
    assert "SECRET" not in json.dumps(reach.__dict__)


def test_the_route_prefers_https_for_a_covered_host_then_the_deploy_key(tmp_path: Path) -> None:
    creds, key = tmp_path / "git-credentials", tmp_path / "deploy-key"
    creds.write_text("https://u:tok@github.com\n")
    remote = "git@github.com:org/repo.git"
    assert route(remote, creds, key) == GitRoute("https://github.com/org/repo.git", creds)
    other = "git@gitlab.com:org/repo.git"  # no credential for gitlab.com: the key, alone
    assert route(other, creds, key) == GitRoute(other, None, key)
    home = "git@github.com:~org/repo.git"  # no https URL for it: the key
    assert route(home, creds, key) == GitRoute(home, None, key)
    assert "over https (https://github.com/org/repo.git)" in route(remote, creds, None).describe(
        remote
    )
    with pytest.raises(NoGitRoute) as caught:
        route(other, creds, None)
    line = caught.value.advice()
    assert "\n" not in line and line.startswith(f"{other} is an ssh remote")
    for way in ("gitlab.com in COLABQ_GIT_CREDENTIALS_FILE", "COLABQ_GIT_SSH_KEY_FILE",
                "code: snapshot"):  # fmt: skip
        assert way in line, line


def test_the_deploy_key_command_names_the_key_alone_and_the_shipped_known_hosts() -> None:
    command = ssh_command(Path("/s/key"), Path("/s/known hosts"))
    assert shlex.split(command) == [
        "ssh", "-i", "/s/key", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=20", "-o", "StrictHostKeyChecking=accept-new",
        "-o", "UserKnownHostsFile=/s/known hosts",
    ]  # fmt: skip


def _card_with(name: str, queues: tuple[str, ...], hosts: tuple[str, ...], key: bool) -> WorkerCard:
    return WorkerCard(name, "h", ("T4",), queues, None, 1.0, 1.0, git_hosts=hosts, git_ssh_key=key)


def test_fetchers_are_the_live_workers_of_the_jobs_queues_that_can_fetch_it() -> None:
    cards = [
        _card_with("w1", ("gpu.t4",), ("gitlab.com",), False),  # its queue, not its host
        _card_with("w2", ("gpu.a100",), ("github.com",), False),  # its host, not its queue
        _card_with("w3", ("gpu.l4", "gpu.t4"), (), True),  # a deploy key
    ]
    remote = "git@github.com:org/repo.git"
    assert fetchers(cards, ["gpu.t4"], remote) == ["w3"]
    assert fetchers(cards[:2], ["gpu.t4"], remote) == []
    assert fetchers(cards, ["gpu.a100"], remote) == ["w2"]
    assert fetchers(cards[:1], ["gpu.t4"], "https://github.com/org/repo.git") == ["w1"]


def test_a_card_read_back_keeps_only_host_names_and_a_true_flag() -> None:
    card = _card_with("w", ("gpu.t4",), ("github.com",), True)
    assert _card(json.loads(json.dumps(card.to_json()))) == card
    forged = {**card.to_json(), "git_hosts": ["github.com", "evil host", 7, "a/b", ""],
              "git_ssh_key": "yes"}  # fmt: skip
    read = _card(forged)
    assert read.git_hosts == ("github.com",) and read.git_ssh_key is False
    old = {k: v for k, v in card.to_json().items() if not k.startswith("git_")}
    assert _card(old).git_hosts == () and _card(old).git_ssh_key is False  # an older worker


# Each forge's published SHA256 host key fingerprints (github.com: docs.github.com "GitHub's SSH
# key fingerprints"; gitlab.com: docs.gitlab.com "SSH host keys fingerprints"; bitbucket.org:
# support.atlassian.com "Configure SSH and two-step verification").
PUBLISHED = {
    ("github.com", "ssh-ed25519"): "+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU",
    ("github.com", "ecdsa-sha2-nistp256"): "p2QAMXNIC1TJYWeIOttrVc98/R1BUFWu3/LiyKgUfQM",
    ("github.com", "ssh-rsa"): "uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
    ("gitlab.com", "ssh-ed25519"): "eUXGGm1YGsMAS7vkcx6JOJdOGHPem5gQp4taiCfCLB8",
    ("gitlab.com", "ecdsa-sha2-nistp256"): "HbW3g8zUjNSksFbqTiUWPWg2Bq1x8xdGUrliXFzSnUw",
    ("gitlab.com", "ssh-rsa"): "ROQFvPThGrW4RuWLoL9tq9I9zJ42fK4XywyRtbOz/EQ",
    ("bitbucket.org", "ssh-ed25519"): "ybgmFkzwOSotHTHLJgHO0QN8L0xErw6vd0VhFA9m3SM",
    ("bitbucket.org", "ecdsa-sha2-nistp256"): "FC73VB6C4OQLSCrjEayhMp9UMxS97caD/Yyi2bhW/J0",
    ("bitbucket.org", "ssh-rsa"): "46OSHA1Rmj8E8ERTC6xkNcmGOw9oFxYr0WF6zWW8l1E",
}


def test_the_shipped_known_hosts_are_the_forges_published_keys() -> None:
    found = {}
    for line in KNOWN_HOSTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        host, kind, blob = line.split()
        digest = hashlib.sha256(base64.b64decode(blob)).digest()
        found[(host, kind)] = base64.b64encode(digest).decode().rstrip("=")
    assert found == PUBLISHED
