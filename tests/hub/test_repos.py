"""Repo lifecycle through the real client: create (private, exist_ok, conflict), info, visibility,
who may see a private repo, and whoami."""

from __future__ import annotations

import pytest
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from .conftest import Hub


def test_private_repo_reports_private_and_has_an_initial_commit(hub: Hub) -> None:
    api = hub.api()
    url = api.create_repo("alice/run-1", private=True)

    info = api.repo_info("alice/run-1")

    assert url.repo_id == "alice/run-1" and url.repo_type == "model"
    assert info.private is True
    assert info.sha is not None and len(info.sha) == 40
    assert [s.rfilename for s in info.siblings or []] == [".gitattributes"]


def test_public_repo_reports_not_private(hub: Hub) -> None:
    hub.api().create_repo("alice/public-run", private=False)

    assert hub.api().repo_info("alice/public-run").private is False


def test_dataset_repos_live_apart_from_models(hub: Hub) -> None:
    api = hub.api()
    url = api.create_repo("alice/data", repo_type="dataset", private=True)

    assert url.repo_type == "dataset"
    assert api.repo_info("alice/data", repo_type="dataset").private is True
    assert api.repo_exists("alice/data", repo_type="dataset") is True
    assert api.repo_exists("alice/data", repo_type="model") is False


def test_create_existing_repo_conflicts_unless_exist_ok(hub: Hub) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")

    again = api.create_repo("alice/run-1", exist_ok=True)
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_repo("alice/run-1")

    assert again.repo_id == "alice/run-1"
    assert excinfo.value.response.status_code == 409


def test_visibility_update_and_admin_override(hub: Hub) -> None:
    api = hub.api()
    api.create_repo("alice/run-1", private=True)

    api.update_repo_settings("alice/run-1", private=False)
    public_after_update = api.repo_info("alice/run-1").private
    api.update_repo_settings("alice/run-1", visibility="private")
    private_again = api.repo_info("alice/run-1").private
    hub.admin.set_private("alice/run-1", private=False)

    assert public_after_update is False
    assert private_again is True
    assert api.repo_info("alice/run-1").private is False


@pytest.mark.parametrize(
    ("caller", "private", "visible"),
    [
        ("alice_write", True, True),
        ("alice_read", True, True),
        (None, True, False),
        ("bob_write", True, False),
        (None, False, True),
        ("bob_write", False, True),
    ],
)
def test_private_repos_are_hidden_from_anonymous_and_other_users(
    hub: Hub, caller: str | None, private: bool, visible: bool
) -> None:
    hub.api().create_repo("alice/run-1", private=private)

    assert hub.api(caller).repo_exists("alice/run-1") is visible
    if not visible:
        with pytest.raises(RepositoryNotFoundError) as excinfo:
            hub.api(caller).repo_info("alice/run-1")
        assert excinfo.value.response.status_code == 404


def test_org_namespace_is_writable_by_its_members_only(hub: Hub) -> None:
    hub.api("alice_write").create_repo("colabq-org/shared")

    with pytest.raises(HfHubHTTPError) as excinfo:
        hub.api("bob_write").create_repo("colabq-org/other")

    assert hub.api("alice_write").repo_exists("colabq-org/shared")
    assert excinfo.value.response.status_code == 403


def test_unknown_revision_is_revision_not_found(hub: Hub) -> None:
    hub.api().create_repo("alice/run-1")

    with pytest.raises(RevisionNotFoundError):
        hub.api().repo_info("alice/run-1", revision="no-such-branch")
    assert hub.api().revision_exists("alice/run-1", "main") is True


def test_whoami_reports_user_and_token_role(hub: Hub) -> None:
    writer = hub.api("alice_write").whoami()
    reader = hub.api("alice_read").whoami()

    assert writer["name"] == "alice"
    assert writer["auth"]["accessToken"]["role"] == "write"
    assert [(o["name"], o["roleInOrg"]) for o in writer["orgs"]] == [("colabq-org", "write")]
    assert reader["auth"]["accessToken"]["role"] == "read"


def test_refs_and_commit_history(hub: Hub) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    commit = api.upload_file(path_or_fileobj=b"v1", path_in_repo="a.txt", repo_id="alice/run-1")

    refs = api.list_repo_refs("alice/run-1")
    history = api.list_repo_commits("alice/run-1")

    assert [(b.name, b.target_commit) for b in refs.branches] == [("main", commit.oid)]
    assert [c.title for c in history] == ["Upload a.txt with huggingface_hub", "initial commit"]
    assert history[0].commit_id == commit.oid and history[0].authors == ["alice"]
