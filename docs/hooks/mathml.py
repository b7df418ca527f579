"""MkDocs hook: LaTeX math to MathML at build time, so the site needs no script and no network.

``pymdownx.arithmatex`` (generic mode) wraps each formula in ``<span class="arithmatex">\\(…\\)``
or ``<div class="arithmatex">\\[…\\]``; this hook replaces those with the MathML that
``latex2mathml`` writes, which browsers render natively.
"""

import html
import re

from latex2mathml.converter import convert

_MATH = re.compile(
    r'<(span|div) class="arithmatex">\s*\\([(\[])(.*?)\\[)\]]\s*</\1>', re.DOTALL
)


def _mathml(match: re.Match) -> str:
    display = "block" if match.group(2) == "[" else "inline"
    return convert(html.unescape(match.group(3)), display=display)


def on_page_content(content: str, **kwargs) -> str:
    return _MATH.sub(_mathml, content)
