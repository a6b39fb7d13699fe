"""System checks of periodic entries (djwork/periodic/checks.py): each bad entry is one error with a hint.

tests/test_checks.py holds one bad value per check id with the other settings'
cases; these are the entry-by-entry cases, @djwork.periodic declarations
and what a running ticker does with an entry the checks would refuse.
"""

from __future__ import annotations

import logging

import pytest
from django.core.checks import Error
from django.test import override_settings

import djwork
from djwork.periodic import entries
from djwork.settings.checks import check_settings
from djwork.settings.conf import build_config
from tests.support.periodic import StandingLeader
from tests.support.settings_values import base_djwork

GOOD = {"cron": "*/5 * * * *", "job": "tests.jobs.add", "args": [1]}
FIRST = {**GOOD, "name": "first"}


def periodic_errors(*raw_entries) -> list[Error]:
    with override_settings(DJWORK={**base_djwork(), "PERIODIC": list(raw_entries)}):
        return check_settings()


@pytest.fixture
def no_declarations():
    saved = dict(entries.declared)
    entries.declared.clear()
    yield entries.declared
    entries.declared.clear()
    entries.declared.update(saved)


@pytest.mark.parametrize(("entry", "check_id", "says", "hint"), [
    ("*/5 * * * *", "djwork.E041", "PERIODIC[1] must be a dict", "An entry looks like"),
    ({"cron": "*/5 * * * *"}, "djwork.E041", "has no 'job'", "An entry looks like"),
    ({**GOOD, "catch": "all"}, "djwork.E041", "unknown key 'catch'", "Did you mean 'catch_up'?"),
    ({**GOOD, "catch_up": "some"}, "djwork.E041", "'catch_up' must be one of", "'latest' runs the most recent"),
    ({**GOOD, "max_lookback": 0}, "djwork.E041", "'max_lookback' must be a number of seconds", "An entry"),
    ({**GOOD, "overlap": "no"}, "djwork.E041", "'overlap' must be True or False", "An entry"),
    ({**GOOD, "args": [object()]}, "djwork.E041", "args[0] is a builtins.object", "travel as JSON"),
    ({**GOOD, "name": "a:b"}, "djwork.E041", "entry id 'a:b'", "no ':'"),
    ({**GOOD, "queue": "Ünï"}, "djwork.E041", "'queue' must be a queue name", "An entry"),
    ({**GOOD, "cron": "*/5 * * *"}, "djwork.E042", "has 4 field(s)", "Five fields"),
    ({**GOOD, "cron": "0 0 30 2 *"}, "djwork.E042", "never fires", "Five fields"),
    ({**GOOD, "job": "tests.jobs.nope"}, "djwork.E043", "no djwork job 'tests.jobs.nope'", "@djwork.job"),
    ({**GOOD, "job": "os.path.join"}, "djwork.E043", "'os.path.join' is not a djwork job", "Decorate"),
    ({**GOOD, "args": [1, 2, 3]}, "djwork.E043", "can't take the entry's arguments", "match the job"),
    ({**GOOD, "tz": "Europe/Atlantis"}, "djwork.E044", "unknown time zone 'Europe/Atlantis'", "IANA"),
    ({**GOOD, "name": "first", "cron": "0 * * * *"}, "djwork.E045", "'first' is already taken by PERIODIC[0]",
     "distinct 'name'"),
    ({**GOOD, "job": "Billing::Invoice"}, "djwork.E041", "entry id 'Billing::Invoice'", "no ':'"),
])
def test_each_bad_entry_is_one_error_with_a_hint_and_the_good_one_passes(no_declarations, entry, check_id, says,
                                                                         hint):
    errors = periodic_errors(FIRST, entry)
    assert [error.id for error in errors] == [check_id], [error.msg for error in errors]
    assert says in errors[0].msg and "PERIODIC[1]" in errors[0].msg
    assert hint in errors[0].hint


def test_a_named_entry_aliases_and_registered_names_resolve(no_declarations):
    assert periodic_errors(GOOD, {**GOOD, "name": "second", "cron": "@daily"},
                           {"cron": "@hourly", "job": "Billing::Invoice", "args": [7], "name": "invoice"}) == []
    with override_settings(DJWORK={**base_djwork(), "ALIASES": {"Refresh": "tests.jobs.add"},
                                   "PERIODIC": [{"cron": "@hourly", "job": "Refresh", "args": [1]}]}):
        assert check_settings() == []


def test_declared_entries_are_checked_with_the_settings_ones(no_declarations):
    @djwork.periodic("0 3 * * *", tz="America/New_York", catch_up="none")
    @djwork.job(name="tests.periodic_checks.nightly")
    def nightly():
        pass

    @djwork.periodic("0 3 * * *", tz="Nowhere/Else")
    @djwork.job(name="tests.periodic_checks.bad_zone")
    def bad_zone():
        pass

    @djwork.periodic("0 4 * * *")
    def not_a_job():
        pass

    # The decorator hands the job back unchanged.
    assert isinstance(nightly, djwork.Job) and nightly.name == "tests.periodic_checks.nightly"
    errors = periodic_errors({"cron": "@daily", "job": "tests.periodic_checks.nightly"})
    assert sorted((error.id, error.msg.split(":")[0]) for error in errors) == [
        ("djwork.E043", "@djwork.periodic on tests.test_periodic_checks.test_declared_entries_are_checked_with_the_"
                        "settings_ones.<locals>.not_a_job"),
        ("djwork.E044", "@djwork.periodic on tests.periodic_checks.bad_zone"),
        ("djwork.E045", "@djwork.periodic on tests.periodic_checks.nightly"),
    ]


def test_a_running_ticker_leaves_bad_entries_out_and_runs_the_others(no_declarations, caplog):
    from djwork.worker.periodic import PeriodicTicker

    bad_cron, unknown_job = {**GOOD, "cron": "bad"}, {**GOOD, "name": "x", "job": "tests.jobs.nope"}
    config = build_config({"PERIODIC": [GOOD, bad_cron, unknown_job]})
    ticker = PeriodicTicker(config, StandingLeader(), "test-process")
    with caplog.at_level(logging.ERROR, logger="djwork.periodic"):
        usable = ticker.entries()
    assert [entry.id for entry, _job in usable] == ["tests.jobs.add"]
    assert "PERIODIC[1] (tests.jobs.add): cron 'bad'" in caplog.text
    assert "entry x left out: no djwork job 'tests.jobs.nope'" in caplog.text
