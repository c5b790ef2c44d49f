"""Helpers for the tests of the ROS 2 interface packages (test/ros/test_interfaces.py,
test/ros/test_simulation_interfaces.py).

* :func:`share_dir` is ``share/<pkg>`` of the prefix a package was imported from;
  :func:`installed_hashes` reads the RIHS01 hashes rosidl wrote into its type descriptions there.
* :func:`round_trip` serializes a message with rclpy's C type support and reads it back;
  :func:`constants` is a generated message class's constants.
* :func:`rihs01_hashes` computes RIHS01 type hashes of .msg, .srv and .action definitions
  with ``rosbags`` (an RIHS01 implementation independent of rosidl), including the types rosidl
  derives from a service (``_Request``, ``_Response``, ``_Event``) and from an action (``_Goal``,
  ``_Result``, ``_Feedback``, ``_SendGoal``, ``_GetResult``, ``_FeedbackMessage`` and their parts);
  :func:`definition_types` is one definition parsed into rosbags' type definitions (derived types
  included); :func:`rosbags_store` is a rosbags type store of .msg files.

RIHS01 (ROS interface hashing standard 01; REP 2011, implemented by rosidl_generator_type_description):
SHA-256 of the JSON of a type description (field names and types and the referenced types, not
constants, defaults or comments).  The implicit types
of services and actions are those of rosidl_parser's ``Service`` and ``Action`` (Jazzy,
rosidl_parser/definition.py), as rosidl_generator_type_description hashes them.

Import this module only after ``pytest.importorskip('rclpy')``; ``rosbags`` is imported when needed
(``pytest.importorskip``, so a test that needs it is skipped without it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest


def share_dir(pkg: str) -> Path:
    """share/<pkg> of the prefix the package ``pkg`` was imported from."""
    module = __import__(pkg)
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(pkg))
    except Exception:
        pass
    # <prefix>/lib/pythonX.Y/site-packages/<pkg>/__init__.py
    return Path(module.__file__).resolve().parents[4] / 'share' / pkg


def installed_hashes(type_name: str) -> dict[str, str]:
    """{type name: RIHS01 hash} from the type description rosidl installed for ``type_name``
    ('pkg/msg|srv|action/Name': share/pkg/<kind>/<Name>.json): the type, the types rosidl derived
    from it and every type it references.  Skips the test when the file is not installed."""
    pkg, kind, name = type_name.split('/')
    path = share_dir(pkg) / kind / f'{name}.json'
    if not path.is_file():
        pytest.skip(f'type description not installed at {path}')
    return {h['type_name']: h['hash_string'] for h in json.loads(path.read_text())['type_hashes']}


def round_trip(msg):
    """``msg`` serialized with rclpy (CDR, through the C type support) and deserialized again;
    asserts the copy equals ``msg`` and returns it."""
    from rclpy.serialization import deserialize_message, serialize_message
    data = serialize_message(msg)
    assert isinstance(data, bytes) and len(data) > 0
    back = deserialize_message(data, type(msg))
    assert back == msg
    return back


def constants(cls) -> dict:
    """{name: value} of the constants of a rosidl-generated message class ``cls``."""
    meta = type(cls)
    return getattr(meta, f'_{meta.__name__}__constants')


def rosbags_store(sources: dict, installed: tuple):
    """A rosbags type store of the definitions ``sources`` ({type name: .msg path}) and of the
    ``installed`` types' .msg files in the venv (share/<pkg>/msg/<Name>.msg)."""
    typesys = pytest.importorskip('rosbags.typesys')
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    sources = dict(sources)
    for type_name in installed:
        pkg, _, name = type_name.split('/')
        sources[type_name] = share_dir(pkg) / 'msg' / f'{name}.msg'
    types = {}
    for type_name, path in sources.items():
        types.update(typesys.get_types_from_msg(path.read_text(), type_name))
    store.register(types)
    return store


# ------------------------------------------------------------ RIHS01 of .srv and .action

def _sections(text: str, count: int, type_name: str) -> list[str]:
    """The ``count`` parts of a .srv (2) or .action (3) text, split at lines that are exactly
    ``---`` (rosidl_adapter's separator)."""
    parts, lines = [[]], text.splitlines()
    for line in lines:
        if line == '---':
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) != count:
        raise ValueError(f'{type_name}: {len(parts) - 1} "---" separators, expected {count - 1}')
    return ['\n'.join(part) + '\n' for part in parts]


def _parse(text: str, type_name: str) -> tuple:
    """rosbags' (constants, fields) of the .msg text ``text`` of ``type_name``.  Parsed under a
    .../msg/ name (rosbags resolves package-relative names against it) and with .msg ``char`` read
    as ``uint8``, as rosidl maps it (ROS 2 interface definition: char is an alias of uint8)."""
    typesys = pytest.importorskip('rosbags.typesys')
    from rosbags.typesys.base import Nodetype
    pkg, _, name = type_name.split('/')
    parsed = typesys.get_types_from_msg(text, f'{pkg}/msg/{name}')
    consts, fields = parsed[f'{pkg}/msg/{name}']

    def uint8_for_char(desc):
        if desc[0] == Nodetype.BASE:
            return (Nodetype.BASE, ('uint8', 0)) if desc[1][0] == 'char' else desc
        if desc[0] in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            return (desc[0], (uint8_for_char(desc[1][0]), desc[1][1]))
        return desc
    return consts, [(field, uint8_for_char(desc)) for field, desc in fields]


def _service_types(service: str, request: tuple, response: tuple) -> dict:
    """The types rosidl derives from a service ``service`` ('pkg/srv|action/Name') with the
    parsed ``request`` and ``response``: _Request, _Response, the _Event message (info, request
    and response as sequences of at most one) and the service description itself."""
    from rosbags.typesys.base import Nodetype

    def named(type_name):
        return (Nodetype.NAME, type_name)

    def at_most_one(type_name):
        return (Nodetype.SEQUENCE, (named(type_name), 1))
    req, rsp, event = f'{service}_Request', f'{service}_Response', f'{service}_Event'
    return {
        req: request,
        rsp: response,
        event: ([], [('info', named('service_msgs/msg/ServiceEventInfo')),
                     ('request', at_most_one(req)), ('response', at_most_one(rsp))]),
        service: ([], [('request_message', named(req)), ('response_message', named(rsp)),
                       ('event_message', named(event))]),
    }


def definition_types(type_name: str, text: str) -> dict:
    """rosbags type definitions of one interface file and of the types rosidl derives from it.

    Args:
        type_name: 'pkg/msg|srv|action/Name'.
        text: the .msg, .srv or .action file's text.

    Returns:
        {type name: (constants [(name, type, value)], fields [(name, rosbags field type)])}: the
        message itself, or for a service X: X_Request, X_Response, X_Event and X (the service
        description: request_message, response_message, event_message); for an action X also
        X_Goal, X_Result, X_Feedback, X_SendGoal, X_GetResult (services as above),
        X_FeedbackMessage and X (goal, result, feedback, send_goal_service, get_result_service,
        feedback_message).

    Raises:
        ValueError: a .srv/.action without its ``---`` separators, or a kind other than msg/srv/action.
    """
    from rosbags.typesys.base import Nodetype
    kind = type_name.split('/')[1]
    if kind == 'msg':
        return {type_name: _parse(text, type_name)}
    if kind == 'srv':
        request, response = _sections(text, 2, type_name)
        return _service_types(type_name, _parse(request, f'{type_name}_Request'),
                              _parse(response, f'{type_name}_Response'))
    if kind != 'action':
        raise ValueError(f'{type_name}: kind {kind!r} is none of msg, srv, action')
    goal, result, feedback = (f'{type_name}_{part}' for part in ('Goal', 'Result', 'Feedback'))
    texts = _sections(text, 3, type_name)
    uuid, time = (Nodetype.NAME, 'unique_identifier_msgs/msg/UUID'), (Nodetype.NAME, 'builtin_interfaces/msg/Time')
    types = {name: _parse(part, name) for name, part in zip((goal, result, feedback), texts)}
    types.update(_service_types(
        f'{type_name}_SendGoal', ([], [('goal_id', uuid), ('goal', (Nodetype.NAME, goal))]),
        ([], [('accepted', (Nodetype.BASE, ('bool', 0))), ('stamp', time)])))
    types.update(_service_types(
        f'{type_name}_GetResult', ([], [('goal_id', uuid)]),
        ([], [('status', (Nodetype.BASE, ('int8', 0))), ('result', (Nodetype.NAME, result))])))
    types[f'{type_name}_FeedbackMessage'] = ([], [('goal_id', uuid), ('feedback', (Nodetype.NAME, feedback))])
    types[type_name] = ([], [('goal', (Nodetype.NAME, goal)), ('result', (Nodetype.NAME, result)),
                             ('feedback', (Nodetype.NAME, feedback)),
                             ('send_goal_service', (Nodetype.NAME, f'{type_name}_SendGoal')),
                             ('get_result_service', (Nodetype.NAME, f'{type_name}_GetResult')),
                             ('feedback_message', (Nodetype.NAME, f'{type_name}_FeedbackMessage'))])
    return types


def installed_msg_text(type_name: str) -> str:
    """The .msg definition of ``type_name`` ('pkg/msg/Name') installed in the venv."""
    pkg, _, name = type_name.split('/')
    return (share_dir(pkg) / 'msg' / f'{name}.msg').read_text()


def rihs01_hashes(definitions: dict[str, str],
                  dependency: Callable[[str], str] = installed_msg_text) -> dict[str, str]:
    """RIHS01 hashes, computed with rosbags, of interface definitions and of the types rosidl
    derives from them.

    Args:
        definitions: {type name ('pkg/msg|srv|action/Name'): text of its .msg, .srv or .action file}.
        dependency: text of the .msg of a referenced type that ``definitions`` lack (default: the
            one installed in the venv).

    Returns:
        {type name: 'RIHS01_<64 hex digits>'} for each definition and each type derived from it
        (for a service X: X_Request, X_Response, X_Event; for an action X also X_Goal, X_Result,
        X_Feedback, X_SendGoal*, X_GetResult*, X_FeedbackMessage).

    Raises:
        ValueError: a .srv/.action without its ``---`` separators, or an unknown kind.
    """
    typesys = pytest.importorskip('rosbags.typesys')
    from rosbags.typesys.base import Nodetype
    types, own = {}, []
    for type_name, text in definitions.items():
        derived = definition_types(type_name, text)
        types.update(derived)
        own.extend(derived)

    def referenced(desc):
        if desc[0] == Nodetype.NAME:
            yield desc[1]
        elif desc[0] in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            yield from referenced(desc[1][0])
    pending = [name for _, fields in types.values() for _, desc in fields for name in referenced(desc)]
    while pending:
        name = pending.pop()
        if name not in types:
            types[name] = _parse(dependency(name), name)
            pending.extend(n for _, desc in types[name][1] for n in referenced(desc))
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    store.register(types)
    return {name: store.hash_rihs01(name) for name in own}
