"""Every option of every `limits` subcommand (the torch commands' parsers included: they are built without
torch) says what it does, and — where it has a default — what the default is; the rule holds for options
added later because the test walks the parsers."""
import argparse
import re

import pytest

from limits.cli import build_parser


def _parsers(p, path=()):
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sp in a.choices.items():
                yield from _parsers(sp, path + (name,))
                assert helps.get(name), f"`limits {' '.join(path + (name,))}` has no help line in its parent's list"


def _options():
    out = []
    for path, p in _parsers(build_parser()):
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            out.append((" ".join(("limits",) + path), "/".join(a.option_strings) or a.dest, a))
    return out


OPTIONS = _options()
FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
         argparse._CountAction)


def _has_default(a) -> bool:
    """An option whose value when left out is something (not None, an empty repeatable list, or a flag's off)."""
    if isinstance(a, FLAGS) or a.default in (None, argparse.SUPPRESS):
        return False
    return not (isinstance(a.default, (list, tuple)) and len(a.default) == 0)


def test_the_walk_sees_every_command():
    commands = {c for c, _, _ in OPTIONS}
    for c in ("limits figure", "limits validate", "limits expect", "limits depth", "limits predict",
              "limits sweep run", "limits pc infer", "limits nfd gia", "limits coord-check", "limits transfer"):
        assert c in commands, c
    assert len(OPTIONS) > 300


def _problem(a):
    """Why option ``a`` breaks the rule (None when it does not)."""
    if not a.help or a.help == argparse.SUPPRESS or len(a.help.strip()) < 8:
        return "no description"
    if _has_default(a) and not re.search(r"default|%\(default\)s", a.help, re.I):
        return f"its help does not state its default {a.default!r}"
    return None


@pytest.mark.parametrize("command", sorted({c for c, _, _ in OPTIONS}))
def test_every_option_has_a_description_and_its_default(command):
    bad = [f"{name}: {_problem(a)}" for c, name, a in OPTIONS if c == command and _problem(a)]
    assert not bad, f"{command}: " + "; ".join(bad)


def test_every_help_page_renders():
    """`limits CMD --help` for every command and subcommand (a stray % in a help text breaks argparse)."""
    for path, p in _parsers(build_parser()):
        assert p.format_help().startswith("usage: "), path


def test_the_rule_catches_what_it_is_for():
    """Power of the rule: an undocumented option and one whose default is not shown are caught; flags, options
    without a value when left out, and repeatable options starting empty need no default."""
    p = argparse.ArgumentParser()
    cases = {"--width": (dict(type=int, default=64), "no description"),
             "--depth": (dict(type=int, default=3, help="number of hidden blocks"), "does not state"),
             "--ok": (dict(type=int, default=3, help="number of hidden blocks (default: 3)"), None),
             "--flag": (dict(action="store_true", help="a switch with no value"), None),
             "--none": (dict(default=None, help="a file, when given"), None),
             "--allow": (dict(action="append", default=[], help="repeatable, none by default"), None)}
    for flag, (kw, want) in cases.items():
        got = _problem(p.add_argument(flag, **kw))
        assert (got is None) if want is None else (want in got), (flag, got)
