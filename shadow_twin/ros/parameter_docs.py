"""The generated parameter reference, ``docs/parameters.md``: one table per node, made from the
node's :class:`~shadow_twin.ros.parameters.ParameterSpec` table (name, type, default, range or
allowed values, unit, read-only, description), so that it cannot drift from what the node declares.

This module renders and writes; which nodes there are is named one layer up, where the node
packages may be imported (:mod:`shadow_twin.cli.parameter_docs`, whose ``--write`` rewrites the
page and ``--check`` exits 1 when it is stale).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import yaml

from shadow_twin.ros.parameters import ParameterSpec

#: The generated page (in a source checkout).
PAGE = Path(__file__).resolve().parents[2] / 'docs' / 'parameters.md'
#: The page whose nav bar the generated page repeats (every docs page has the same one).
NAV_SOURCE = PAGE.parent / 'configuration.md'
#: ROS type of a parameter, by the Python type of its default.
ROS_TYPES = {bool: 'bool', int: 'integer', float: 'double', str: 'string', list: 'string[]', tuple: 'string[]'}
COLUMNS = ('name', 'type', 'default', 'range / allowed', 'unit', 'read-only', 'description')


@dataclass(frozen=True)
class NodeTable:
    """One node's part of the page.

    Attributes:
        node: the node's default name (its section title).
        about: one sentence on the node (Markdown).
        sources: the modules of its spec table (repository paths).
        config_files: globs of the ``config/`` params files it loads (see docs/configuration.md).
        specs: the parameters it always declares, in declaration order.
        patterns: parameters whose names are made at start (``<name>``, ``<joint>``), with a note.
        pattern_note: what decides the pattern parameters and their defaults (Markdown).
    """

    node: str
    about: str
    sources: tuple[str, ...]
    config_files: tuple[str, ...]
    specs: tuple[ParameterSpec, ...]
    patterns: tuple[ParameterSpec, ...] = field(default_factory=tuple)
    pattern_note: str = ''


def cell(text: str) -> str:
    """``text`` safe in a Markdown table cell: ``|`` escaped, no line breaks."""
    return ' '.join(text.replace('|', '\\|').split())


def code(value: str) -> str:
    """``value`` as a code span of a table cell (``|`` escaped)."""
    return f'`{value.replace("|", chr(92) + "|")}`'


def yaml_text(value) -> str:
    """``value`` as a params file writes it (YAML flow style): ``250.0``, ``''``, ``[hand, arm]``."""
    text = yaml.safe_dump(list(value) if isinstance(value, tuple) else value, default_flow_style=True,
                          width=10_000).strip()
    return text[:-3].strip() if text.endswith('...') else text


def prose(text: str) -> str:
    """A description in a table cell: ``<``/``>`` as entities (``<model>`` is not an HTML tag), ``*``
    escaped (``rh_*`` is no emphasis)."""
    return cell(text.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('*', '\\*'))


def row(spec: ParameterSpec) -> str:
    """The table row of ``spec``."""
    allowed = ''
    if spec.bounds is not None:
        allowed = f'{spec.bounds[0]:g} .. {spec.bounds[1]:g}'
    elif spec.choices is not None:
        allowed = ', '.join(spec.choices)
    cells = (code(spec.name), ROS_TYPES.get(type(spec.default), type(spec.default).__name__),
             code(yaml_text(spec.default)), cell(allowed), prose(spec.unit), 'yes' if spec.read_only else '',
             prose(spec.description))
    return '| ' + ' | '.join(cells) + ' |'


def table(specs: Iterable[ParameterSpec]) -> str:
    """The Markdown table of ``specs`` (:data:`COLUMNS`), one row each in order."""
    lines = ['| ' + ' | '.join(COLUMNS) + ' |', '|' + '---|' * len(COLUMNS)]
    return '\n'.join(lines + [row(spec) for spec in specs])


def section(node: NodeTable) -> str:
    """A node's section: title, where its parameters come from, its table(s)."""
    files = ', '.join(f'`config/{name}`' for name in node.config_files) or 'none'
    sources = ', '.join(f'`{path}`' for path in node.sources)
    parts = [f'## {node.node}', '', f'{node.about} Spec table: {sources}; params files: {files}.', '',
             table(node.specs)]
    if node.patterns:
        parts += ['', node.pattern_note, '', table(node.patterns)]
    return '\n'.join(parts)


def nav_bar(page: Path = NAV_SOURCE) -> str:
    """The nav bar paragraph of ``page`` (the second paragraph, 'Part of the shadow_twin manual ...')."""
    paragraphs = page.read_text(encoding='utf-8').split('\n\n')
    return paragraphs[1].strip() if len(paragraphs) > 1 else ''


def render(nodes: Iterable[NodeTable], command: str, nav: str | None = None) -> str:
    """The whole page: title, nav bar (``nav``, default :func:`nav_bar`), how it is made (``command``
    regenerates it), what the columns mean, one section per node."""
    nodes = list(nodes)
    intro = (
        f'Generated from each node\'s parameter table by `{command}`: edit the `ParameterSpec` in the source '
        'named under each node, not this page (a test checks that it is current). The same table is what the '
        'node declares (`ros2 param describe` shows the description with its unit, range and allowed values), '
        'checks at start and on `ros2 param set`, and reads as typed settings (`shadow_twin/ros/settings.py`); '
        'the shipped `config/*.yaml` files set only what differs from these defaults '
        '([configuration files](configuration.md)).')
    legend = (
        'Columns: **name** as in a params file (`a.b` = the key `b` nested under `a`); **type** the ROS '
        'parameter type (a double also takes an integer); **default** as YAML; **range / allowed** the '
        'inclusive range of a number or the allowed strings; **unit** of the value (of a YAML mapping\'s '
        'values); **read-only**: fixed at start, `ros2 param set` is refused.')
    nodes_line = 'Nodes: ' + ' · '.join(f'[{n.node}](#{n.node.replace(" ", "-")})' for n in nodes) + '.'
    body = ['# ROS parameters', '', nav if nav is not None else nav_bar(), '', cell(intro), '', cell(legend), '',
            nodes_line]
    for node in nodes:
        body += ['', section(node)]
    return '\n'.join(body) + '\n'


def main(nodes: Callable[[], Iterable[NodeTable]], command: str, argv: list[str] | None = None,
         page: Path = PAGE) -> int:
    """Command line: print the page, ``--write`` it to ``page`` or ``--check`` it (exit 1 and say
    the ``command`` to run when the file differs). Returns the exit status."""
    parser = argparse.ArgumentParser(description='the generated ROS parameter reference, docs/parameters.md')
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--write', action='store_true', help=f'write {page}')
    group.add_argument('--check', action='store_true', help=f'exit 1 when {page} is not current')
    args = parser.parse_args(argv)
    text = render(nodes(), command)
    if args.write:
        page.write_text(text, encoding='utf-8')
        print(f'wrote {page}')
    elif args.check:
        current = page.read_text(encoding='utf-8') if page.is_file() else ''
        if current != text:
            print(f'{page} is not current: run {command}', file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0
