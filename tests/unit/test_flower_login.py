"""The login Flower is given: a complete one passes; none, a half-set OAuth, or a password where
others can read it is refused with a line naming what to set (`worker.flowerlogin`). Each way
of starting the real Flower is in tests/integration/test_flower_login.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.flowerlogin import (
    FlowerLoginError,
    Login,
    auth_file_lines,
    check_login,
    secret_options_on,
)

GOOGLE = "flower.views.auth.GoogleAuth2LoginHandler"
OKTA = "flower.views.auth.OktaLoginHandler"
OAUTH = Login(auth=".*@example.com", provider=GOOGLE, key="id", secret="s",
              redirect_uri="https://flower.example.com/login")  # fmt: skip
BASIC = Login(basic_auth=("ops:pw",))


@pytest.mark.parametrize(
    ("login", "env"),
    [
        (BASIC, {}),
        (OAUTH, {}),
        (
            Login(**{**OAUTH.__dict__, "provider": OKTA}),
            {"FLOWER_OAUTH2_OKTA_BASE_URL": "https://o"},
        ),
        (Login(**{**OAUTH.__dict__, "auth": "a@x.com|b@y.com"}), {}),
        (Login(**{**OAUTH.__dict__, "basic_auth": ("ops:pw",)}), {}),
        (BASIC, {"FLOWER_UNAUTHENTICATED_API": "false"}),
    ],
)
def test_a_complete_login_passes(login: Login, env: dict[str, str]) -> None:
    check_login(login, ["flower", "--port=5555", "--auth=.*@example.com"], env)


@pytest.mark.parametrize(
    ("login", "argv", "env", "named"),
    [
        (Login(), [], {}, "COLABQ_FLOWER_AUTH_FILE"),
        (Login(basic_auth=("ops:",)), [], {}, "user:password"),
        (Login(provider=GOOGLE), [], {}, "without FLOWER_AUTH"),
        (Login(**{**BASIC.__dict__, "provider": GOOGLE}), [], {}, "without FLOWER_AUTH"),
        (Login(auth=".*@example.com"), [], {}, "FLOWER_AUTH_PROVIDER, FLOWER_OAUTH2_KEY"),
        (Login(**{**OAUTH.__dict__, "secret": ""}), [], {}, "set FLOWER_OAUTH2_SECRET as well"),
        (Login(**{**OAUTH.__dict__, "redirect_uri": ""}), [], {}, "FLOWER_OAUTH2_REDIRECT_URI"),
        (Login(**{**OAUTH.__dict__, "provider": OKTA}), [], {}, "FLOWER_OAUTH2_OKTA_BASE_URL"),
        (Login(**{**OAUTH.__dict__, "provider": "no.such.Handler"}), [], {}, "cannot be loaded"),
        (Login(**{**OAUTH.__dict__, "auth": ".*@*.com"}), [], {}, "is not an email"),
        (Login(**{**OAUTH.__dict__, "redirect_uri": "flower/login"}), [], {}, "http(s) URL"),
        (BASIC, ["--basic-auth=ops:pw"], {}, "--basic-auth is on the command line"),
        (OAUTH, ["-oauth2_secret=s"], {}, "-oauth2_secret is on the command line"),
        (BASIC, [], {"FLOWER_BASIC_AUTH": "ops:pw"}, "FLOWER_BASIC_AUTH is set"),
        (BASIC, [], {"FLOWER_UNAUTHENTICATED_API": "1"}, "FLOWER_UNAUTHENTICATED_API"),
    ],
)
def test_flower_without_a_real_login_is_refused(
    login: Login, argv: list[str], env: dict[str, str], named: str
) -> None:
    with pytest.raises(FlowerLoginError) as refused:
        check_login(login, argv, env)
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_passwords_on_a_command_line_are_found_however_written() -> None:
    argv = ["--basic-auth=a:b", "--basic_auth=a:b", "-basic_auth=a:b", "--oauth2-secret=s",
            "--auth=.*@x.com", "--port=1", "basic_auth=x", "--oauth2_key=id"]  # fmt: skip
    found = secret_options_on(argv)  # named, never with the password itself
    assert found == ["--basic-auth", "--basic_auth", "-basic_auth", "--oauth2-secret"]


def test_the_login_file_is_private_and_holds_user_password_lines(tmp_path: Path) -> None:
    path = tmp_path / "flower-auth"
    path.write_text("ops:pw\n\nbot:pw2\n")
    path.chmod(0o600)
    assert auth_file_lines({"COLABQ_FLOWER_AUTH_FILE": str(path)}) == ["ops:pw", "bot:pw2"]
    assert auth_file_lines({}) == []
    path.chmod(0o640)
    with pytest.raises(FlowerLoginError, match="chmod 600"):
        auth_file_lines({"COLABQ_FLOWER_AUTH_FILE": str(path)})
    path.chmod(0o600)
    path.write_text("just-a-password\n")
    with pytest.raises(FlowerLoginError, match="user:password"):
        auth_file_lines({"COLABQ_FLOWER_AUTH_FILE": str(path)})
    with pytest.raises(FlowerLoginError, match="cannot read"):
        auth_file_lines({"COLABQ_FLOWER_AUTH_FILE": str(tmp_path / "missing")})
