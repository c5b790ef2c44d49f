"""The text and legend drawn on a video frame (Pillow): the time stamp and which is which (sim solid, real ghost)
at the top left, the links with the largest sim-real error (mm, each with its colour) at the bottom left and the
error scale's colour bar at the bottom right.

Sizes follow the frame's height (the text is about 1/28 of it, at least 9 px). Units: s, m (printed in mm), px.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from shadow_twin.visual.colours import ErrorScale

#: Links listed per frame (the largest errors first).
WORST_LINKS = 4
_BACKDROP = (255, 255, 255, 170)
_INK = (20, 20, 20, 255)


def _font(size: int):
    """Pillow's bundled TrueType font at ``size`` px (its small bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):        # Pillow < 10.1, or without FreeType
        return ImageFont.load_default()


class Overlay:
    """Draws the frame's text onto (H, W, 3) uint8 images of one size.

    Args:
        width, height: the frames, px.
        scale: the ghost's colours (its legend is drawn from it).
        names: (L,) the links' names, as the errors passed to :meth:`draw` are ordered.
        title: a line under the time stamp (e.g. the recording's name; '' for none).
        worst: how many links to list.
    """

    def __init__(self, width: int, height: int, scale: ErrorScale, names: Sequence[str], title: str = '',
                 worst: int = WORST_LINKS) -> None:
        self.width, self.height, self.scale = width, height, scale
        self.names, self.title, self.worst = list(names), title, worst
        self.size = max(9, height // 28)
        self.font = _font(self.size)
        self.small = _font(max(8, self.size * 4 // 5))
        self.line = self.size + max(2, self.size // 4)
        self.pad = max(3, self.size // 3)
        self.legend = self._legend()

    def draw(self, image: np.ndarray, time: float, errors: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8: ``image`` with the time stamp (``time`` s) at the top left, the worst of ``errors``
        ((L,) m, NaN: unknown) at the bottom left and the legend at the bottom right drawn on (the middle, where
        the view is aimed, stays clear); ``image`` is left as it is."""
        frame = Image.fromarray(image).convert('RGBA')
        layer = Image.new('RGBA', frame.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(layer)
        header = [(f't = {time:6.2f} s', self.font, None), ('solid: sim   ghost: real', self.small, None)]
        if self.title:
            header.insert(1, (self.title, self.small, None))
        errors = np.asarray(errors, dtype=float)
        finite = np.where(np.isfinite(errors), errors, -np.inf)
        order = [k for k in np.argsort(-finite, kind='stable')[:self.worst] if np.isfinite(errors[k])]
        colours = self.scale.rgba(errors)
        links = [(f'{self.names[k]}  {errors[k] * 1e3:5.1f} mm', self.small, colours[k]) for k in order]
        self._block(draw, header, top=True)
        if links:
            self._block(draw, links, top=False)
        layer.alpha_composite(self.legend, (self.width - self.legend.width - self.pad,
                                            self.height - self.legend.height - self.pad))
        return np.asarray(Image.alpha_composite(frame, layer).convert('RGB'))

    def _block(self, draw: ImageDraw.ImageDraw, lines: list, top: bool) -> None:
        """Lines of (text, font, swatch rgba or None) on a backdrop in the top or the bottom left corner."""
        pad = self.pad
        width = max(draw.textlength(text, font=font) + (self.line if swatch is not None else 0)
                    for text, font, swatch in lines)
        height = 2 * pad + len(lines) * self.line
        y0 = 0 if top else self.height - height
        draw.rectangle((0, y0, int(width) + 2 * pad, y0 + height), fill=_BACKDROP)
        y = y0 + pad
        for text, font, swatch in lines:
            x = pad
            if swatch is not None:
                box = self.line - 4
                draw.rectangle((x, y + 2, x + box, y + 2 + box), fill=_rgb(swatch), outline=_INK)
                x += self.line
            draw.text((x, y), text, font=font, fill=_INK)
            y += self.line

    def _legend(self) -> Image.Image:
        """The colour bar from 0 to the scale's full value (mm), with its title: an RGBA image."""
        full_mm = self.scale.full_scale * 1e3
        title = 'link error (sim - real)'
        probe = ImageDraw.Draw(Image.new('RGBA', (1, 1)))
        labels = probe.textlength(f'{full_mm / 2:g} mm', font=self.small) + probe.textlength(f'{full_mm:g} mm+',
                                                                                            font=self.small)
        bar_width = int(max(60, self.width // 4, 2 * labels + 3 * self.size))     # the three labels apart
        bar_height = max(6, self.size // 2)
        pad = self.pad
        width = int(max(bar_width, probe.textlength(title, font=self.small))) + 2 * pad
        height = pad + self.line + bar_height + self.line + pad
        image = Image.new('RGBA', (width, height), _BACKDROP)
        draw = ImageDraw.Draw(image)
        draw.text((pad, pad), title, font=self.small, fill=_INK)
        top = pad + self.line
        colours = self.scale.rgba(np.linspace(0.0, self.scale.full_scale, bar_width))
        for x, colour in enumerate(colours):
            draw.line((pad + x, top, pad + x, top + bar_height), fill=_rgb(colour))
        for value, anchor in ((0.0, 'la'), (full_mm / 2, 'ma'), (full_mm, 'ra')):
            x = pad + (bar_width - 1) * value / full_mm
            label = f'{value:g} mm' + ('+' if value == full_mm else '')
            draw.text((x, top + bar_height + 2), label, font=self.small, fill=_INK, anchor=anchor)
        return image


def _rgb(colour: np.ndarray) -> tuple[int, int, int, int]:
    """An opaque Pillow colour from an rgba (4,) 0-1."""
    return (*(int(round(255 * c)) for c in colour[:3]), 255)
