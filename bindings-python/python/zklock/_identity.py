"""``Participant.identity``'s type."""

from __future__ import annotations

from typing import Optional, TypedDict



class ParticipantIdentity(TypedDict):
    """Who made a lock node, as zklock records it in the node (any language's zklock):
    ``Participant.identity``."""

    #: Host name of the process.
    host: str
    #: Its process id.
    pid: int
    #: The owner's label (``"thread:<name>"``, ``"task:<name>"``, or another language's).
    owner: str
    #: The language: ``"rust"``, ``"c"``, ``"python"`` or ``"node"``.
    lang: str
    #: The lock's identifier, if one was given.
    identifier: Optional[str]
