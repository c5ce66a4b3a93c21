"""Job-file keys and sweep expansion, as pure functions: one model for flags and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from producer.jobfile import FIELDS, read_job_file, validate
from producer.sweep import derive_name, expand, parse_sweep_flags
from worker.errors import UserInputError

BASE = {"script": "train.sh", "name": "coco-r50-bs64"}


def test_grid_is_the_cartesian_product_with_derived_names_and_env() -> None:
    grid = parse_sweep_flags(["env.LR=1e-4,3e-4", "env.SEED=0,1,2"])
    points = expand(validate(BASE, "t").model_dump(), grid, "t")
    assert len(points) == 6
    names = [p.options.name for p in points]
    assert names[0] == "coco-r50-bs64-lr1e-4-seed0"
    assert names[-1] == "coco-r50-bs64-lr3e-4-seed2"
    assert len(set(names)) == 6
    assert points[4].options.env == ("LR=3e-4", "SEED=1")


def test_swept_env_replaces_a_fixed_one_and_keeps_the_others() -> None:
    base = validate({**BASE, "env": {"LR": "1", "WARMUP": 500}}, "t").model_dump()
    (point,) = expand(base, {"env.LR": ["2"]}, "t")
    assert sorted(point.options.env) == ["LR=2", "WARMUP=500"]


def test_an_option_can_be_swept_and_is_validated_like_a_flag() -> None:
    points = expand(validate(BASE, "t").model_dump(), {"gpu": ["T4", "A100"]}, "t")
    assert [p.options.gpu for p in points] == ["T4", "A100"]
    assert [p.options.name for p in points] == ["coco-r50-bs64-t4", "coco-r50-bs64-a100"]
    with pytest.raises(UserInputError, match="max_restarts"):
        expand(validate(BASE, "t").model_dump(), {"max_restarts": ["1", "99"]}, "t")


def test_placeholders_in_the_name_are_filled() -> None:
    name = derive_name("coco-r50-lr{env.LR}-s{env.SEED}", [("env.LR", "3e-4"), ("env.SEED", "1")])
    assert name == "coco-r50-lr3e-4-s1"
    with pytest.raises(UserInputError, match="not a swept key"):
        derive_name("coco-{env.BS}", [("env.LR", "1")])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["env.LR"], "KEY=V1,V2"),
        (["env.LR="], "KEY=V1,V2"),
        (["env.LR=1,,2"], "KEY=V1,V2"),
        (["=1,2"], "KEY=V1,V2"),
        (["env.LR=1", "env.LR=2"], "twice"),
    ],
)
def test_malformed_sweep_flags(flags: list[str], message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        parse_sweep_flags(flags)


@pytest.mark.parametrize("key", ["name", "env", "sync", "idempotency_key", "nonsense"])
def test_keys_that_cannot_be_swept(key: str) -> None:
    with pytest.raises(UserInputError, match="sweep key"):
        expand(validate(BASE, "t").model_dump(), {key: ["a", "b"]}, "t")


def test_a_sweep_that_derives_one_name_twice_is_refused() -> None:
    with pytest.raises(UserInputError, match="twice"):
        expand(validate(BASE, "t").model_dump(), {"env.X": ["a/b", "a_b"]}, "t")


def test_a_grid_over_the_limit_is_refused_before_expanding() -> None:
    grid = {"env.A": list(range(200)), "env.B": list(range(200))}
    with pytest.raises(UserInputError, match="40000 points"):
        expand(validate(BASE, "t").model_dump(), grid, "t")


def test_every_submit_option_is_a_job_file_key() -> None:
    from producer.commands.submit import _NOT_KEYS, submit

    params = set(submit.__code__.co_varnames[: submit.__code__.co_argcount]) - {"ctx"}
    # The positional TARGET is the script (or the job file itself).
    assert params - _NOT_KEYS == set(FIELDS) - {"script"}


def test_job_file_paths_are_relative_to_the_file_and_unknown_keys_named(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    f = tmp_path / "jobs" / "job.yaml"
    f.write_text("script: train.sh\nname: coco-r50\nrepo_dir: ..\nsweep:\n  env.LR: [1, 2]\n")
    data, grid = read_job_file(f)
    assert data["script"] == str(tmp_path / "jobs" / "train.sh")
    assert Path(data["repo_dir"]).resolve() == tmp_path
    assert grid == {"env.LR": [1, 2]}
    f.write_text("script: train.sh\nhub-repo: alice/runs\n")
    with pytest.raises(
        UserInputError, match="unknown key 'hub-repo' \\(did you mean hub_repo\\?\\)"
    ):
        read_job_file(f)


def test_a_job_files_env_mapping_keeps_its_values_in_every_point() -> None:
    base = {**BASE, "env": {"CODE_SUBDIR": "examples/x", "LR": 1}}
    points = expand(base, {"env.SEED": [0, 1]}, "t")
    assert [sorted(p.options.env) for p in points] == [
        ["CODE_SUBDIR=examples/x", "LR=1", f"SEED={s}"] for s in (0, 1)
    ]


def test_flags_replace_keys_but_add_to_name_value_pairs() -> None:
    from producer.jobfile import merge_flags

    fields = {**BASE, "gpu": "L4", "env": {"A": 1, "B": 2}, "sync": ["ckpt"]}
    merged = merge_flags(fields, {"gpu": "T4", "env": ("B=3", "C=4"), "sync": ("out",)})
    opts = validate(merged, "t")
    assert opts.gpu == "T4" and opts.sync == ("out",)
    assert opts.env == ("A=1", "B=3", "C=4")
