"""`examples/aios-ledger.toml` cannot drift from the loader: as shipped it loads to exactly the
built-in defaults, and with every commented setting switched on it names every key each section
accepts, and still loads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import attrs
from aios_ledger.core.config import LedgerSettings
from aios_ledger.shell.config import load_settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "aios-ledger.toml"
COMMENTED_SETTING = re.compile(r"^# ([a-z_]+ = .*)$", re.MULTILINE)


def test_the_shipped_example_holds_the_defaults() -> None:
    assert load_settings(str(EXAMPLE)) == LedgerSettings()


def test_every_key_the_loader_accepts_is_in_the_example(tmp_path: Path) -> None:
    switched_on = tmp_path / "aios-ledger.toml"
    switched_on.write_text(COMMENTED_SETTING.sub(r"\1", EXAMPLE.read_text()))
    loaded = load_settings(str(switched_on))  # the real loader: every key known, every value valid
    written = tomllib.loads(switched_on.read_text())
    defaults = LedgerSettings()
    expected = {
        section.name: sorted(
            field.name for field in attrs.fields(type(getattr(defaults, section.name)))
        )
        for section in attrs.fields(LedgerSettings)
    }
    assert {name: sorted(keys) for name, keys in written.items()} == expected
    # commented out: exactly the settings without a default (None), shown with an example value
    shipped = tomllib.loads(EXAMPLE.read_text())
    for name, keys in written.items():
        section = getattr(LedgerSettings(), name)
        commented = set(keys) - set(shipped.get(name, {}))
        assert commented == {key for key in keys if getattr(section, key) is None}, name
        for key in commented:
            assert getattr(getattr(loaded, name), key) is not None, (name, key)
