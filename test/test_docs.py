"""The manual (README.md and docs/*.md) stays true to the repository: links resolve, commands parse.

* **Links**: every relative Markdown link and image, ``[text](path)`` and ``![alt](path)`` (and
  reference definitions ``[label]: path``), outside code blocks and code spans, names a file or
  directory that exists, relative to the page that holds it. ``http(s)://`` and ``mailto:``
  targets are skipped; a ``#fragment`` is stripped before the check.
* **Anchors** (a separate test): the ``#fragment`` of a link to a Markdown page (or a pure
  ``#anchor``, on its own page) names a heading of that page, slugged as GitHub does.
* **Commands**: every ``shadow-twin ...`` command line in a fenced code block (```` ```bash ````,
  ```` ```sh ````, ```` ```shell ````, ```` ```console ```` or a block without a language) parses
  with the real argument parser of that command, without running it: ``build_parser()`` of
  ``shadow_twin/cli/main.py`` for ``evaluate``, ``calibrate`` and ``sensitivity``; for the
  subcommands ``main`` delegates (``main.DELEGATED``) and for ``calibrate --protocol``
  (``main.CELL_CALIBRATION``), the parser that module builds itself, as ``main.main`` would pick
  it. A command may be ``shadow-twin`` or a path ending in it (``.venv/bin/shadow-twin``), after
  a ``$`` prompt or after ``&&``, ``||``, ``;`` or ``|``; lines continued with a trailing ``\\``
  are joined, trailing ``# comments`` dropped (``shlex``). ``up``'s ``--ros-args ...`` tail is
  split off as ``up`` does. Usage summaries are skipped: a command with a ``[`` or ``<`` in
  any argument (``[--opt]``, ``<run>``). ```` ```text ```` blocks hold usage summaries (the
  synopsis in docs/commands.md) and are not checked.

No ROS is needed (the parsers are only built and asked to parse).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]
#: Languages of fenced blocks whose ``shadow-twin`` lines are commands ('' = no language given).
SHELL_LANGUAGES = {'', 'bash', 'sh', 'shell', 'console'}
SKIPPED_SCHEMES = ('http://', 'https://', 'mailto:')
SHELL_OPERATORS = {'&&', '||', ';', '|', '&'}

FENCE = re.compile(r'^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)')
INLINE_LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(?P<target><[^>]*>|[^)\s]+)(?:\s+["\'(][^)]*)?\s*\)')
REFERENCE_DEFINITION = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(?P<target><[^>]*>|\S+)')
CODE_SPAN = re.compile(r'(`+)(?:(?!\1).)+?\1')


def _page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


# -- Markdown structure ------------------------------------------------------------------------------
def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """The fenced code blocks of ``text``: (language, line number of the first content line, lines)."""
    blocks, lines, k = [], text.splitlines(), 0
    while k < len(lines):
        opening = FENCE.match(lines[k])
        if not opening:
            k += 1
            continue
        fence, body, start = opening['fence'], [], k + 2
        k += 1
        while k < len(lines) and not (lines[k].strip().startswith(fence[0] * len(fence))
                                      and set(lines[k].strip()) == {fence[0]}):
            body.append(lines[k])
            k += 1
        blocks.append((opening['lang'].lower(), start, body))
        k += 1
    return blocks


def prose(text: str, code_spans: bool = False) -> str:
    """``text`` with its fenced and indented code blocks blanked (line numbers kept) and its code
    spans removed (kept with ``code_spans``): what Markdown renders as prose, where links are links."""
    out, fence, code, previous_blank = [], None, False, True
    for line in text.splitlines():
        opening = FENCE.match(line)
        if fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and set(line.strip()) == {fence[0]}:
                fence = None
            line = ''
        elif opening:
            fence, line = opening['fence'], ''
        else:
            code = (code or previous_blank) and (line.startswith('    ') or (code and not line.strip()))
            previous_blank = not line.strip()
            if code:
                line = ''
        out.append(line)
    body = '\n'.join(out)
    return body if code_spans else CODE_SPAN.sub('', body)


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and reference definition in ``text``
    (a link's text may wrap over lines)."""
    body = prose(text)
    found = [(body.count('\n', 0, m.start()) + 1, m['target']) for m in INLINE_LINK.finditer(body)]
    for number, line in enumerate(body.splitlines(), 1):
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            found.append((number, definition['target']))
    return sorted(((n, t[1:-1] if t.startswith('<') else t) for n, t in found), key=lambda item: item[0])


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of ``text``: lower case, punctuation dropped, spaces
    as ``-``, a repeated slug numbered ``-1``, ``-2``, ..."""
    anchors: set[str] = set()
    for line in prose(text, code_spans=True).splitlines():
        match = re.match(r'^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not match:
            continue
        slug = re.sub(r'[^\w\- ]', '', match[1].replace('`', '').lower()).replace(' ', '-')
        unique, k = slug, 0
        while unique in anchors:
            k += 1
            unique = f'{slug}-{k}'
        anchors.add(unique)
    return anchors


def relative_path(target: str) -> str | None:
    """The path a link target names in the repository, or None for an external link or a pure anchor."""
    if target.lower().startswith(SKIPPED_SCHEMES) or target.startswith('#'):
        return None
    return target.split('#', 1)[0].split('?', 1)[0]


# -- commands ------------------------------------------------------------------------------------------
def command_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) of the shell blocks of ``text``: continuations joined."""
    out = []
    for lang, start, body in fenced_blocks(text):
        if lang not in SHELL_LANGUAGES:
            continue
        pending, first = '', None
        for offset, line in enumerate(body):
            if first is None:
                first = start + offset
            if line.rstrip().endswith('\\'):
                pending += line.rstrip()[:-1] + ' '
                continue
            out.append((first, pending + line))
            pending, first = '', None
        if pending:
            out.append((first, pending))
    return out


def shadow_twin_commands(line: str) -> list[list[str]]:
    """The argument lists (after ``shadow-twin``) of the ``shadow-twin`` commands on one logical line."""
    stripped = line.strip()
    if stripped.startswith('$ '):
        stripped = stripped[2:]
    if 'shadow-twin' not in stripped:
        return []
    lexer = shlex.shlex(stripped, posix=True, punctuation_chars=';&|')
    lexer.whitespace_split = True
    lexer.commenters = '#'
    tokens = list(lexer)
    commands, segment = [], []
    for token in tokens + [';']:
        if token in SHELL_OPERATORS or (token and set(token) <= set(';&|')):
            if segment and Path(segment[0]).name == 'shadow-twin':
                commands.append(segment[1:])
            segment = []
        else:
            segment.append(token)
    return commands


def is_usage_summary(argv: list[str]) -> bool:
    return any('[' in arg or '<' in arg for arg in argv)


class _ParseFailed(Exception):
    pass


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``; argparse's exit (usage error) and the ConfigError of the
    parsers that raise instead of exiting become _ParseFailed with the message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code in (0, None):      # --help
            return argparse.Namespace()
        raise _ParseFailed(err.getvalue().strip() or f'exit {exc.code}') from None
    except Exception as exc:           # the ErrorLineParser of calibrate --protocol, --contacts, frame-calibration
        raise _ParseFailed(f'{type(exc).__name__}: {exc}') from None


def parser_for(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser ``shadow-twin argv...`` is parsed with, as ``shadow_twin.cli.main.main`` picks it,
    and the arguments it gets."""
    from shadow_twin.cli import main
    if argv and argv[0] in main.DELEGATED:
        module = importlib.import_module(main.DELEGATED[argv[0]][0])
        rest = list(argv[1:])
        if argv[0] == 'up' and '--ros-args' in rest:          # up hands what follows to the nodes
            rest = rest[:rest.index('--ros-args')]
        if hasattr(module, 'build_parser'):
            return module.build_parser(), rest
        if hasattr(module, 'add_parser'):                      # model: a parser added to subparsers
            holder = argparse.ArgumentParser(prog='shadow-twin')
            return module.add_parser(holder.add_subparsers()), rest
        raise AssertionError(f'{module.__name__} has neither build_parser() nor add_parser()')
    if argv and argv[0] == 'calibrate' and any(a == '--protocol' or a.startswith('--protocol=') for a in argv):
        return importlib.import_module(main.CELL_CALIBRATION).build_parser(), list(argv[1:])
    if argv and argv[0] == 'calibrate' and any(a == '--contacts' or a.startswith('--contacts=') for a in argv):
        return importlib.import_module(main.SCENE_CALIBRATION).build_parser(), list(argv[1:])
    if argv and argv[0] == 'evaluate' and '--effort' in argv:
        return importlib.import_module(main.EFFORT_EVALUATION).build_parser(), [a for a in argv[1:] if a != '--effort']
    return main.build_parser(), list(argv)


def documented_commands() -> list[tuple[str, int, list[str]]]:
    """(page, line number, argv after ``shadow-twin``) of every checked command in the manual."""
    found = []
    for page in PAGES:
        for number, line in command_lines(page.read_text(encoding='utf-8')):
            for argv in shadow_twin_commands(line):
                if not is_usage_summary(argv):
                    found.append((_page_id(page), number, argv))
    return found


# -- tests ---------------------------------------------------------------------------------------------
def test_the_manual_is_there():
    assert (REPO / 'README.md').is_file()
    names = {p.name for p in PAGES}
    for page in ('bridge.md', 'twin.md', 'goal_lifecycle.md', 'monitor.md', 'calibration.md', 'cell.md',
                 'commands.md', 'configuration.md', 'benchmarks.md'):
        assert page in names, f'docs/{page} is missing'


def test_readme_links_every_docs_page():
    linked = {(REPO / relative_path(t)).resolve() for _, t in link_targets((REPO / 'README.md').read_text())
              if relative_path(t)}
    missing = [_page_id(p) for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f'README.md links none of: {missing}'


def nav_bar(text: str) -> str:
    """The paragraph under a page's title that starts 'Part of the shadow_twin manual', or ''."""
    paragraphs = text.split('\n\n')
    return paragraphs[1].strip() if len(paragraphs) > 1 and paragraphs[1].startswith('Part of the shadow_twin manual') \
        else ''


def test_every_docs_page_has_the_same_nav_bar_linking_every_page():
    bars = {_page_id(p): nav_bar(p.read_text(encoding='utf-8')) for p in PAGES[1:]}
    assert all(bars.values()), f'pages without the nav bar: {[k for k, v in bars.items() if not v]}'
    assert len(set(bars.values())) == 1, f'pages whose nav bar differs: {bars}'
    linked = {relative_path(t) for _, t in link_targets(next(iter(bars.values())))}
    missing = [p.name for p in PAGES[1:] if p.name not in linked]
    assert not missing and '../README.md' in linked, f'the nav bar links none of {missing}'


def test_the_nav_bar_check_sees_a_page_without_it():
    assert nav_bar('# Title\n\nPart of the shadow_twin manual: [README](../README.md)\n\nText') \
        == 'Part of the shadow_twin manual: [README](../README.md)'
    assert nav_bar('# Title\n\nText first\n\nPart of the shadow_twin manual: x') == ''


@pytest.mark.parametrize('page', PAGES, ids=_page_id)
def test_relative_links_resolve(page: Path):
    broken = []
    for number, target in link_targets(page.read_text(encoding='utf-8')):
        path = relative_path(target)
        if path is None:
            continue
        resolved = (REPO / path.lstrip('/')) if path.startswith('/') else (page.parent / path)
        if not path or not resolved.exists():
            broken.append(f'{_page_id(page)}:{number}: ({target}) -> {resolved.relative_to(REPO.parent)} '
                          f'does not exist')
    assert not broken, 'broken links:\n' + '\n'.join(broken)


@pytest.mark.parametrize('page', PAGES, ids=_page_id)
def test_anchors_resolve(page: Path):
    broken = []
    for number, target in link_targets(page.read_text(encoding='utf-8')):
        if '#' not in target or target.lower().startswith(SKIPPED_SCHEMES):
            continue
        path, anchor = target.split('#', 1)
        linked = page if not path else page.parent / path
        if linked.suffix != '.md' or not linked.is_file():
            continue                        # not a page (or a broken link: test_relative_links_resolve)
        if anchor not in heading_anchors(linked.read_text(encoding='utf-8')):
            broken.append(f'{_page_id(page)}:{number}: ({target}): no heading #{anchor} in '
                          f'{linked.resolve().relative_to(REPO)}')
    assert not broken, 'links to missing headings:\n' + '\n'.join(broken)


def test_the_quick_start_commands_are_checked():
    """The README's two set-up commands are as CI and reviewers use them, and the demo's is parsed."""
    readme = (REPO / 'README.md').read_text(encoding='utf-8')
    assert 'bash scripts/setup.sh && .venv/bin/shadow-twin demo\n' in readme
    assert 'bash scripts/setup.sh && .venv/bin/python -m pytest test\n' in readme
    checked = documented_commands()
    assert ('README.md', ['demo']) in [(page, argv) for page, _, argv in checked]
    assert len(checked) >= 10, f'only {len(checked)} shadow-twin commands found in the manual'


@pytest.mark.parametrize('page', PAGES, ids=_page_id)
def test_shadow_twin_commands_parse(page: Path):
    failures = []
    for page_id, number, argv in documented_commands():
        if page_id != _page_id(page):
            continue
        parser, args = parser_for(argv)
        try:
            _parse(parser, args)
        except _ParseFailed as exc:
            failures.append(f'{page_id}:{number}: shadow-twin {shlex.join(argv)}\n    {exc}')
    assert not failures, 'commands that do not parse:\n' + '\n'.join(failures)


# -- the checks themselves -------------------------------------------------------------------------------
def test_link_extraction():
    text = ('See [a](docs/a.md#x), ![img](b.png "title"), [ext](https://e.org), [top](#quick-start),\n'
            '`[not](code.md)` and [ref]: <c d.md>\n\n```bash\n[no](link.md)\n```\n\n    [indented](code.md)\n')
    targets = [t for _, t in link_targets(text)]
    assert targets == ['docs/a.md#x', 'b.png', 'https://e.org', '#quick-start']
    assert [t for _, t in link_targets('[r]: <c d.md>\n')] == ['c d.md']
    assert [relative_path(t) for t in targets] == ['docs/a.md', 'b.png', None, None]


def test_heading_anchors():
    text = ('# The cell: UR5\n## Faults and load: `benchmarks/faults.py`\n### calibration_node: calibrate it\n'
            '## Calibrating the cell from its protocol\'s bags: `shadow-twin calibrate --protocol`\n'
            '## Notes\n## Notes\n```bash\n# not a heading\n```\n')
    assert heading_anchors(text) == {
        'the-cell-ur5', 'faults-and-load-benchmarksfaultspy', 'calibration_node-calibrate-it',
        'calibrating-the-cell-from-its-protocols-bags-shadow-twin-calibrate---protocol', 'notes', 'notes-1'}


def test_command_extraction():
    text = ('```bash\n'
            'bash scripts/setup.sh && .venv/bin/shadow-twin demo    # the main job\n'
            '.venv/bin/shadow-twin calibrate --model cell.xml \\\n'
            '    --out runs/x      # a comment\n'
            'shadow-twin model --cell [--hand MJCF] --out cell.xml\n'
            'ros2 launch shadow_twin twin.launch.py\n'
            "shadow-twin model --cell --arm-prefix '' --out c.xml; echo done\n"
            '```\n'
            '```text\nshadow-twin sensitivity --model MJCF\n```\n'
            '```console\n$ shadow-twin plot --bag b\noutput\n```\n')
    argvs = [argv for _, line in command_lines(text) for argv in shadow_twin_commands(line)]
    assert argvs == [['demo'], ['calibrate', '--model', 'cell.xml', '--out', 'runs/x'],
                     ['model', '--cell', '[--hand', 'MJCF]', '--out', 'cell.xml'],
                     ['model', '--cell', '--arm-prefix', '', '--out', 'c.xml'], ['plot', '--bag', 'b']]
    assert [is_usage_summary(a) for a in argvs] == [False, False, True, False, False]


@pytest.mark.parametrize('argv', [
    ['demo', '--no-such-flag'],
    ['up', '--mode', 'sideways'],
    ['calibrate', '--model', 'x.xml'],                                # --bag, --trajectory, --space, --out missing
    ['calibrate', '--protocol', 'cell', '--bags', 'b'],               # --out missing
    ['frame-calibration', '--a', '1', '2', '--b', '1', '2', '3', '--c', '1', '2', '3'],
    ['model', '--cell'],                                              # --out missing
    ['no-such-command'],
])
def test_a_bad_command_does_not_parse(argv):
    parser, args = parser_for(argv)
    with pytest.raises(_ParseFailed):
        _parse(parser, args)


def test_up_hands_ros_args_to_the_nodes():
    parser, args = parser_for(['up', '--mock-hardware', '--ros-args', '-p', 'x:=1'])
    assert _parse(parser, args).mock_hardware
