"""Text an agent controls, made inert for a human's terminal (pure).

Every control character (C0, DEL, C1), every format character (bidi overrides and isolates, zero-width
marks) and every line or paragraph separator is shown as a visible escape, never interpreted: a crafted
requester, argument, environment value or script line cannot move the cursor, recolour the screen,
reorder text or start a line of its own. A backslash is doubled so that an escape cannot be faked. A run of
blanks after a line's first word that is long enough to push what follows out of sight (a box that scrolls,
a terminal that wraps it onto blank-looking rows) is shown by its length, `⟨400 spaces⟩`, so the tail of a
line (`; curl ... | sh`) stands next to its head. Indentation is left as it is (it is seen as indentation) up
to a terminal's width. Every blank other than the ASCII space (no-break, em and ideographic spaces, the
Hangul and braille fillers) is escaped too, and a run that mixes blanks, escaped characters and invisible
ones is counted the same way (`⟨8000 blank, invisible or control characters⟩`): no character that renders
as nothing can stand in for a space the count would show.

A job's output (`rsk logs`) is shown on a terminal with `inert_output`: its lines, tabs and carriage returns
stay as they are (a log is read as lines; a progress bar redraws its own line), and every other control
character (ESC, so no escape sequence: screen clears, cursor moves, titles, OSC 52's clipboard; the C1 set; BEL)
and every bidi control is shown as an escape.
"""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


# characters that render as blank but are not spaces by category (Hangul fillers, the braille blank)
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _unsafe(ch: str) -> bool:
    """Escaped when shown: a control, format, surrogate, private or unassigned character, a line or paragraph
    separator, every blank but the ASCII space, and the backslash (so that an escape cannot be faked)."""
    if ch == "\\":
        return True
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (cat == "Zs" and ch != " ") or ch in _FILLERS


def _filler(ch: str) -> bool:
    """What a run that hides a line's tail is made of: spaces, and anything that shows as nothing or as an escape."""
    return ch == " " or (ch != "\\" and _unsafe(ch))


RUN = 16  # a run of this many fillers after some text is shown by its length
INDENT = 80  # and, at the start of a line, one of this many (a terminal's width: no code is indented so far)


def _runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of fillers long enough to push what follows out of sight."""
    out, i, n = [], 0, len(text)
    while i < n:
        if not _filler(text[i]):
            i += 1
            continue
        j = i
        while j < n and _filler(text[j]):
            j += 1
        spaces = text[i:j].count(" ") == j - i
        if j - i >= (INDENT if i == 0 and spaces else RUN):
            out.append((i, j))
        i = j
    return out


def _count(run: str) -> str:
    if run.count(" ") == len(run):
        return f"⟨{len(run)} spaces⟩"
    return f"⟨{len(run)} blank, invisible or control characters⟩"


def inert(text: str) -> str:
    """One line: every unsafe character escaped (newlines too), long runs of blanks shown by their length."""
    parts, at = [], 0
    for start, end in _runs(text):
        parts += [_escape(ch) if _unsafe(ch) else ch for ch in text[at:start]]
        parts.append(_count(text[start:end]))
        at = end
    parts += [_escape(ch) if _unsafe(ch) else ch for ch in text[at:]]
    return "".join(parts)


def inert_lines(text: str) -> list[str]:
    """A multi-line text (a script) as lines, each made inert; the line breaks themselves are kept."""
    return [inert(line) for line in text.split("\n")]


# a job's output on a terminal: every control character (C0, DEL, C1) but line breaks, tabs and carriage returns, and
# every bidi embedding, override and isolate, shown as its escape
_OUTPUT = {
    code: _escape(chr(code))
    for code in (*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
    if chr(code) not in "\n\t\r"
}


def inert_output(text: str) -> str:
    """A job's output as a terminal may show it: line breaks, tabs and carriage returns kept, every other control
    character and every bidi control escaped (`\\x1b`), so nothing the job wrote acts on the terminal. Backslashes
    are left alone (a log's paths and regexes stay readable): `\\x1b` may be the job's text or an escape, and
    neither acts."""
    return text.translate(_OUTPUT)
