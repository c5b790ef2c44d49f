"""Machine-dependent figures live in docs/benchmarks.md, with their date and machine (issue 35, item 5).

A time, a rate reached, a CPU share, a speed-up or a load measured on one PC changes with the PC: a
page that repeats one needs a re-measure each time. So no page of the manual (README.md, docs/*.md)
but docs/benchmarks.md states one in its prose; it links there instead
(``[measured](benchmarks.md#section)``; a figure in the text of such a link passes). The check is a
heuristic, :func:`machine_figures`, tried on sample sentences below: a figure put back is found;
parameter defaults, targets and bounds, code and links pass. Beside test/test_docs.py (links,
anchors, nav bar, commands), whose Markdown reading (:func:`test_docs.prose`) it shares.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_docs import PAGES, REPO, prose

_NUMBER = r'(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?[-–/]\s?\d[\d,]*(?:\.\d+)?)?\s?'
#: A time or a rate: a machine's figure in a sentence that says it was measured (:data:`MEASURED`).
TIMING = re.compile(_NUMBER + r'(?:ms|µs|us|s|min|Hz|kHz)\b')
#: Figures that are always a machine's: speed-ups, CPU shares, throughput, load.
SPEED = re.compile(_NUMBER + r'(?:(?:x|times) (?:faster|slower|real[ -]time)|% of (?:a|one) core|cores\b'
                   r'|(?:rollouts|steps)/s\b|times per second)'
                   r'|\bCPU\b[^.;]{0,25}?\d\s?%|\bload average (?:of )?\d', re.I)
#: Words that say a figure was measured: "(31 ms measured)", "measured here: ...", "took 7 s", "on this
#: PC", ... ("the measured velocities" are a signal, "the real MiR's, measured" a value to put in: neither).
MEASURED = re.compile(r'\d\s?(?:ms|s|Hz|%)\s+measured\b|\bmeasured(?=\s*(?:[:(]|(?:here|on|by|in|at|over|with|beside'
                      r'|during|the|an?)\b))|\b(?:took|takes?) (?:about |up to |under |over |only )?\d'
                      r'|\bp(?:50|90|95|99)\b|\bmedian\b'
                      r'|(?:\bthis|\b(?:on|of) a) (?:\d-core )?(?:PC|machine)\b|\bhere\b|\bbusy processes\b', re.I)
#: Targets and bounds (``target p50 <= 30 ms``, ``< 0.5 s``) are no measurement: left out before the search.
TARGET = re.compile(r'\btargets?\b[^;)]*|[<>≤≥]=?\s*' + _NUMBER + r'\w*', re.I)
BENCHMARKS_LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(?:\.\./)?(?:docs/)?benchmarks\.md(?:#[^)\s]*)?\s*\)')
#: Where a sentence ends: after . ! or ? before a capital, at a blank line, before a table row or list item.
SENTENCE_BREAK = re.compile(r'(?<=[.!?])\s+(?=[A-Z(`*\[])|\n\s*\n|\n(?=\s*(?:[|*-]|\d+\.) )')


def machine_figures(text: str) -> list[tuple[int, str]]:
    """(line number, sentence) of each sentence of the Markdown ``text``'s prose (a table row or a list
    item counts as one; code blocks, code spans and links to benchmarks.md left out) that states a
    figure of the machine it was measured on: a speed-up, CPU share, throughput or load anywhere
    (:data:`SPEED`), or a time or rate (:data:`TIMING`) in a sentence that says it was measured
    (:data:`MEASURED`: measured, took N, p50, median, on this PC, here, ...); targets and bounds
    (:data:`TARGET`) do not count. Empty for a page that states none."""
    body, found, start = BENCHMARKS_LINK.sub('', prose(text)), [], 0
    for unit in SENTENCE_BREAK.split(body):
        start = body.index(unit, start)
        sentence = ' '.join(unit.split())
        plain = TARGET.sub('', sentence)
        if SPEED.search(plain) or (TIMING.search(plain) and MEASURED.search(plain)):
            found.append((body.count('\n', 0, start) + 1, sentence))
        start += len(unit)
    return found


@pytest.mark.parametrize('page', [p for p in PAGES if p.name != 'benchmarks.md'],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_machine_dependent_figures_are_only_in_benchmarks_md(page: Path):
    found = [f'{page.relative_to(REPO)}:{n}: {sentence[:300]}'
             for n, sentence in machine_figures(page.read_text(encoding='utf-8'))]
    assert not found, ('figures that depend on the machine belong in docs/benchmarks.md, with their date and '
                       'machine, linked from the page ([measured](benchmarks.md#section)):\n' + '\n'.join(found))


def test_benchmarks_md_is_a_page_of_the_manual():
    assert (REPO / 'docs' / 'benchmarks.md') in PAGES


@pytest.mark.parametrize('sentence', [
    'On this 2-core PC the error ends 99.7 % lower in 90 s.',
    '`benchmarks/faults.py` measured the abort arriving p50 254 ms after the kill.',
    'The sim runs 15–60x faster than real time offline.',
    'With UDP the bridge uses 19–25 % of a core at 250 Hz.',
    'A preemption storm held the streams off their 250 Hz (130–210 Hz measured).',
    'A 1.5 s cell window took 0.7 s at a load average of 40.',
    'The fit of 4,000 samples takes 0.3 s, of 20,000 under 2 s.',
    '| run | hand |\n|---|---|\n| quiet | p50 27 ms, max 44 ms |',
])
def test_a_machine_figure_put_back_is_found(sentence):
    assert machine_figures(f'# Page\n\nText before.\n\n{sentence} More text.\n')


@pytest.mark.parametrize('sentence', [
    'Every part is stamped to start `start_lead` (0.25 s; the cell 0.5 s) after the goal arrived.',
    'The parts start start_lead 0.25 s plus 0.2 ms per point after the goal arrived.',
    'It prints the fault-to-abort latency (p50, max; target < 0.5 s) and the rates (target >= 240 Hz).',
    'Its figures: [p50 27 ms on this PC](benchmarks.md#acceptance-times-issue-33).',
    'The acceleration is fitted to the measured velocities (8 ms at 125 Hz).',
    "The integral holds the robot's measured pose (time constant 1 s).",
    "| `base.command_latency` | double | 0 .. 1 | s | The drives' dead time (the real MiR's, measured); 0.1 s: ... |",
    'A finger stops within ~0.1 s.\n\n```bash\n# took 3 s on this PC\n```',
])
def test_parameters_targets_and_links_are_no_machine_figures(sentence):
    assert not machine_figures(f'# Page\n\n{sentence}\n')
