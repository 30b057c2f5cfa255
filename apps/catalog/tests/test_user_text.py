"""Text users choose never becomes shell code: it is refused when it holds characters a shell
(or a quoted string around the placeholder) would interpret, and lands as a literal when not."""

import subprocess

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.options import OptionsError, resolve
from apps.catalog.templating import TemplateError, configure_plan, default_hostnames

from .factories import make_version

ATTACKS = [
    "x; touch /tmp/pwned",
    "$(id)",
    "`id`",
    "a\nid",
    "a\rid",
    "it's",
    'say "hi"',
    "a | b",
    "a && b",
    "a > /etc/passwd",
    "${IFS}",
    "*",
    "back\\slash",
    "--fork",
]
LITERALS = ["hello from Platter", "rs0", "a.b:c/d@e+f=g,h_i-j", ""]
# The same placeholder bare, in double quotes and in single quotes, as admins write them.
SCRIPTS = {
    "bare": "printf '%s|' {{note}}",
    "double": 'printf "%s|" "{{note}}"',
    "single": "printf '%s|' '{{note}}'",
}


def with_note(**definition) -> object:
    """The factory's version plus a free-text option with no pattern of its own."""
    version = make_version()
    version.options_schema["advanced"]["note"] = {
        "type": "str",
        "default": "x",
        "description": "Free text",
        **definition,
    }
    version.configure = [
        {"role": "master", "once": True, "description": quoting, "command": ["sh", "-c", s]}
        for quoting, s in SCRIPTS.items()
    ]
    return version


@pytest.mark.parametrize("attack", ATTACKS)
def test_it_refuses_shell_characters_in_a_text_option_naming_the_option(attack):
    with pytest.raises(OptionsError) as refused:
        resolve(with_note(), {"note": attack})
    assert set(refused.value.errors) == {"note"}
    assert "no shell characters" in refused.value.errors["note"]
    assert repr(attack) in refused.value.errors["note"]


def test_a_products_own_pattern_cannot_let_shell_characters_through():
    with pytest.raises(OptionsError, match="no shell characters"):
        resolve(with_note(pattern=".*"), {"note": "$(id)"})


@pytest.mark.parametrize("value", LITERALS)
def test_allowed_text_lands_as_a_literal_however_the_placeholder_is_quoted(value):
    version = with_note()
    spec = resolve(version, {"note": value})
    plan = configure_plan(version, spec, "c1", default_hostnames("c1", spec))
    for step in plan:
        [(_instance, argv)] = step["runs"]
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10).stdout
        # Bare, the shell splits on spaces (printf repeats its format per word, once for none).
        words = (value.split() or [""]) if step["description"] == "bare" else [value]
        assert out == "".join(f"{word}|" for word in words), step["description"]


def test_it_refuses_to_render_for_a_cluster_name_with_shell_characters():
    version = with_note()
    spec = resolve(version, {})
    with pytest.raises(TemplateError, match="cluster may hold only"):
        configure_plan(version, spec, "c1;reboot", default_hostnames("c1", spec))


def test_a_product_default_with_shell_characters_is_refused_when_saved():
    version = with_note(default="$(id)")
    with pytest.raises(ValidationError) as refused:
        version.clean()
    assert "no shell characters" in str(refused.value.message_dict["options_schema"])
