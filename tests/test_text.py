from tuimon.text import is_safe, sanitize

HOSTILE = ["\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "\x9b31m", "abc\u202edcba", "nul\x00here", "bell\x07",
           "\u2066iso\u2069", "zero\u200bwidth", "line\u2028sep", "del\x7f", "bom\ufeff"]


def test_sanitize_neutralises_every_control_and_format_character():
    for text in HOSTILE:
        out = sanitize(text)
        assert is_safe(out), repr(out)
        assert "\x1b" not in out and "\x9b" not in out


def test_sanitize_keeps_ordinary_text_and_markup_characters():
    s = "[bold]x[/] [@click=app.quit]q[/] [link=http://x]y[/link] 5% |#####| é 漢"
    assert sanitize(s) == s
    assert sanitize("a\tb") == "a    b"
    assert sanitize("x" * 5000).endswith("…")


def test_a_csv_cell_that_is_a_lone_sign_is_no_formula():
    from tuimon.figures.cells import csv_text

    assert csv_text("-") == "-" and csv_text("+") == "+"
    assert csv_text("-2+3") == "'-2+3" and csv_text("=1") == "'=1" and csv_text("@x") == "'@x"
