"""The words of a running job's life, typed: node and worker health, node event kinds, takeover kinds, resize
causes, and the states `rlplace status` and the pictures show.

Each is a `StrEnum`: a member is its string (`NodeHealth.LOST == "lost"`; `json.dumps` and f-strings write
"lost"), so job records, `status --format json` and the pictures' attributes read as they always did, and a
record written before these types existed decodes into them. No module compares a bare lifecycle string: a
misspelt member is an AttributeError where it is written, not a branch that silently never runs. The standard
library only: the Ray layer, the simulation, the pictures and the examples all sit above it (pyproject.toml).
"""

from __future__ import annotations

from enum import StrEnum


class NodeHealth(StrEnum):
    """A node rank's health as its job sees it (`JobState.health`); a rank's `Trouble` is one of the last three."""

    OK = "ok"
    DRAINING = "draining"  # its node goes at a deadline: calls sent there finish, new ones wait
    LOST = "lost"  # waiting for a spare or a replacement
    FAILED = "failed"  # the replacement window passed (a spare or replacement may still take it over)


class EventKind(StrEnum):
    """What a `NodeEvent` says happened to a node of the job (`job.events`, in this order of a rank's life)."""

    DRAINING = "draining"  # Ray said the node goes at a deadline
    LOST = "lost"  # the node is gone
    SPARE = "spare"  # a hot spare took the rank over
    REPLACEMENT = "replacement"  # a node started again with the rank's label took it over
    SHRUNK = "shrunk"  # none did: the node's elastic components shrank instead
    GROWN = "grown"  # a node serves the rank again (or joined as a new one) and the components grew back
    FAILED = "failed"  # none did within the replacement window


class Takeover(StrEnum):
    """How a node comes to serve a rank of the job (the failover rules' answer, `rlplace.ray.failover.rules`)."""

    REPLACEMENT = "replacement"  # started with the rank's label
    SPARE = "spare"  # a hot spare of the lost node's shape
    NEW_NODE = "new node"  # labelled with the next rank: new capacity an elastic job grows onto


class ResizeCause(StrEnum):
    """Why an elastic component changed size (`ResizeEvent.cause`)."""

    RESIZE = "resize"  # `job.resize`
    NODE_LOST = "node lost"  # its node was lost and nothing took it over
    GROW_BACK = "grow back"  # capacity came back after such a shrink


class WorkerState(StrEnum):
    """A worker's state in `rlplace status`: Ray's actor states (its actor table's words), and two of rlplace's."""

    DEPENDENCIES_UNREADY = "DEPENDENCIES_UNREADY"
    PENDING_CREATION = "PENDING_CREATION"
    ALIVE = "ALIVE"
    RESTARTING = "RESTARTING"
    DEAD = "DEAD"
    LOST = "LOST"  # alive to Ray, but its node is gone (declared dead, or its raylet refuses connections)
    DRIVER = "DRIVER"  # a driver-local worker (`remote_<component>: false`): a plain object in the driver


class NodeStatus(StrEnum):
    """A node's row in `rlplace status`: only nodes of a live job that are not plainly healthy, and draining ones."""

    LOST = "LOST"
    FAILED = "FAILED"
    SPARE = "SPARE"
    REPLACED = "REPLACED"
    SHRUNK = "SHRUNK"  # elastic components shrank off it
    GROWN = "GROWN"  # they grew back onto it
    DRAINING = "DRAINING"  # Ray takes the node away at a deadline


class NodeMark(StrEnum):
    """How a picture marks a node of a running job (`Job.node_health()`, `rlplace.viz`)."""

    OK = "ok"
    LOST = "lost"  # waiting for a spare or replacement (also: lost, and its elastic components shrank)
    FAILED = "failed"  # none came in time
    SPARE = "spare"  # a hot spare serves the rank
    REPLACED = "replaced"  # a node started again with the rank (or a new one the components grew onto) serves it


class GroupState(StrEnum):
    """A placement group's state, in Ray's words (the first of `Cluster.group_state`'s pair), and INFEASIBLE, the
    one scheduling state (the second) the reservation acts on."""

    PENDING = "PENDING"
    CREATED = "CREATED"
    REMOVED = "REMOVED"
    RESCHEDULING = "RESCHEDULING"  # a node of it died: Ray places it again
    INFEASIBLE = "INFEASIBLE"  # no node of the cluster could ever hold it
