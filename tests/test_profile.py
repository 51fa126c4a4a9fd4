import pytest

from labsupport import profile


def test_env_var_overrides_and_argument_wins(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "gpu")
    assert profile.current().name == "gpu"
    assert profile.current("cpu").name == "cpu"
    monkeypatch.delenv(profile.ENV_VAR)
    assert profile.current().name == profile.default_name()


def test_unknown_profile_and_setting(monkeypatch):
    monkeypatch.setenv(profile.ENV_VAR, "tpu")
    with pytest.raises(ValueError, match=r"unknown profile 'tpu'.*LABSUPPORT_PROFILE"):
        profile.current()
    with pytest.raises(AttributeError, match="has no setting 'nope'"):
        profile.current("cpu").nope


def test_presets_share_their_keys():
    assert set(profile.PRESETS["cpu"]) == set(profile.PRESETS["gpu"])
