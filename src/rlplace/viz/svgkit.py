"""Tiny SVG writer: escaped text and attributes, stable number formatting, nothing else.

Hand-rolled on purpose: the picture needs a few element kinds, and a dependency for that would cost
every user an install. Numbers are rounded to 0.1 px so output is byte-identical across runs.
"""

from __future__ import annotations

from html import escape

#: Advance of one character of the monospace face, as a fraction of the font size (DejaVu Sans Mono).
CHAR_EM = 0.61


def num(v: float) -> str:
    """`12.0` -> `12`, `3.14159` -> `3.1`: short, deterministic coordinates."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def attrs(**kw: object) -> str:
    """Keyword attributes as SVG text; `class_` -> `class`, `data_x` -> `data-x`; None values dropped."""
    parts = []
    for key, value in kw.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        text = num(value) if isinstance(value, float) else str(value)
        parts.append(f'{name}="{escape(text, quote=True)}"')
    return " ".join(parts)


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_EM


def fit(text: str, width: float, size: float) -> str:
    """Cut `text` with an ellipsis so it fits `width` px; the full text goes in a hover title."""
    room = int(width / (size * CHAR_EM))
    if len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…"


class Svg:
    """An append-only list of SVG elements."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def open(self, tag: str, **kw: object) -> None:
        self.parts.append(f"<{tag} {attrs(**kw)}>" if kw else f"<{tag}>")

    def close(self, tag: str) -> None:
        self.parts.append(f"</{tag}>")

    def empty(self, tag: str, **kw: object) -> None:
        self.parts.append(f"<{tag} {attrs(**kw)}/>")

    def rect(self, x: float, y: float, w: float, h: float, **kw: object) -> None:
        self.empty("rect", x=float(x), y=float(y), width=float(w), height=float(h), **kw)

    def text(self, x: float, y: float, content: str, **kw: object) -> None:
        self.parts.append(f"<text {attrs(x=float(x), y=float(y), **kw)}>{escape(content, quote=False)}</text>")

    def title(self, content: str) -> None:
        """Hover text of the enclosing element (browsers show it as a tooltip)."""
        self.parts.append(f"<title>{escape(content, quote=False)}</title>")

    def render(self) -> str:
        return "\n".join(self.parts)
