"""docs/settings.md, the settings table and the Config agree: one description of each setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from django.test import override_settings

from djwork.settings.conf import Config, build_config
from djwork.settings.doc import KEYS_BEGIN, KEYS_END, with_keys_rendered
from djwork.settings.kinds import check_kind
from djwork.settings.table import SETTINGS
from tests.support.settings_values import BAD_VALUES, base_djwork

DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
SPECS = {spec.name: spec for spec in SETTINGS}
DICT_CHECK_IDS = {"djwork.E000", "djwork.E001"}  # about the DJWORK dict itself (djwork/settings/checks.py), no key's
CELERY_CHECK_IDS = {"djwork.W010", "djwork.W011"}  # about CELERY_* settings (djwork/settings/from_celery.py)
JOB_CHECK_IDS = {"djwork.E075"}  # about the declared jobs (djwork/settings/checks.py), no setting's


def doc_rows(prefix: str) -> dict[str, list[str]]:
    """The doc's table rows whose first cell starts with ``prefix``: first cell (unquoted) -> the other cells."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{prefix}"):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_keys_tables_are_the_rendered_table():
    doc = DOC.read_text(encoding="utf-8")
    assert KEYS_BEGIN in doc and KEYS_END in doc
    assert with_keys_rendered(doc) == doc, (
        "docs/settings.md's Keys tables differ from djwork/settings/table.py; "
        "run `python -m djwork.settings.doc docs/settings.md`")


def test_every_documented_key_is_in_the_table_with_its_default_and_check_id():
    keys = {name: cells for name, cells in doc_rows("").items() if not name.startswith("djwork.")}
    assert set(keys) == set(SPECS)
    for name, (default, _meaning, checks) in keys.items():
        spec = SPECS[name]
        assert repr(spec.default).replace("'", '"') in default, name
        assert spec.check_id.removeprefix("djwork.") in checks.split(", "), name


def test_check_ids_table_lists_exactly_the_ids_raised_and_names_their_keys():
    described = doc_rows("djwork.")
    raised = DICT_CHECK_IDS | CELERY_CHECK_IDS | JOB_CHECK_IDS | {
        check_id for spec in SETTINGS for check_id in (spec.check_id, *spec.also)}
    assert set(described) == raised
    for spec in SETTINGS:
        assert f"`{spec.name}" in described[spec.check_id][0], (spec.name, spec.check_id)


def test_config_has_one_attribute_per_setting():
    fields = {field.name for field in dataclasses.fields(Config)} - {"raw"}
    assert fields == {spec.attribute for spec in SETTINGS}


@pytest.mark.parametrize(("key", "value", "check_id"), BAD_VALUES,
                         ids=[f"{key}={value!r}" for key, value, _ in BAD_VALUES])
def test_a_bad_values_check_id_is_listed_for_its_key(key, value, check_id):
    spec = SPECS[key]
    assert check_id in (spec.check_id, *spec.also), "docs/settings.md's Checks column would miss it"


SIMPLE_BAD_VALUES = [(key, value) for key, value, _id in BAD_VALUES if SPECS[key].check is check_kind]


@pytest.mark.parametrize(("key", "value"), SIMPLE_BAD_VALUES, ids=[f"{k}={v!r}" for k, v in SIMPLE_BAD_VALUES])
def test_a_value_its_kind_refuses_falls_back_to_the_default(key, value):
    spec = SPECS[key]
    with override_settings(DJWORK={**base_djwork(), key: value}):
        assert getattr(build_config(), spec.attribute) == spec.parse(spec.default)


def test_health_host_is_typed():
    assert build_config({"HEALTH_HOST": "127.0.0.1"}).health_host == "127.0.0.1"
    assert build_config().health_host == "0.0.0.0"

