"""``manage.py runworkers``: its help names the defaults and the signals; a bad -q value says what is wrong."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from djwork.management.commands.runworkers import Command


def parser():
    return Command().create_parser("manage.py", "runworkers")


def test_help_shows_the_defaults_in_force_and_the_signals():
    text = " ".join(parser().format_help().split())  # argparse wraps to the terminal's width
    for expected in ("CONCURRENCY setting, 5 here", "QUEUES setting, critical default low here",
                     "TIMEOUT setting, 5 here", "TERM, INT", "TSTP", "TTIN", "--timeout seconds"):
        assert expected in text, text


@pytest.mark.parametrize(("value", "expected"), [
    ("default,abc", "'default,abc': the weight after the comma must be a whole number, as in default,3"),
    ("default,", "the weight after the comma must be a whole number"),
    ("default,-1", "'default,-1': the weight must be 0 or more"),
    ("bad name,2", "'bad name' is not a queue name (ASCII letters of either case, digits and _ : . - only"),
    (",3", "'' is not a queue name"),
])
def test_a_bad_queue_option_names_what_is_wrong(value, expected):
    with pytest.raises(CommandError) as raised:
        parser().parse_args(["-q", value])
    assert expected in str(raised.value)
    assert "invalid literal" not in str(raised.value)


def test_queue_names_of_either_case_and_weights_parse():
    options = parser().parse_args(["-q", "Mail.Out,3", "-q", "low"])
    assert options.queues == [("Mail.Out", 3), ("low", 0)]
