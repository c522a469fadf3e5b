"""EchoMQ: a reliable job queue on Redis.

Five patterns, each one atomic Lua script: the claim (lane -> active at a server-clock lease), redelivery
(the at-least-once price), the stalled sweep, the fenced finish, and the blocking pickup. Admission is
idempotent on a branded, sortable job id, and service rotates fairly across lanes. :class:`Bus` is the
asyncio API (producers and workers); :class:`SyncBus` is the producer's API on a blocking client.
:class:`Scheduler` (and :class:`SyncScheduler`) enqueue the ticks of periodic :class:`Schedule` s, each
once however many schedulers run.
"""

from echomq import ids
from echomq.bus import Bus
from echomq.core import DEFAULT_TAG, MAX_PAYLOAD, Settings
from echomq.dead import DeadDeletion, DeadRetry
from echomq.effects import Completion, Effects
from echomq.errors import (
    EchoMQError,
    EffectRefused,
    InvalidEffect,
    InvalidId,
    InvalidInput,
    InvalidLane,
    InvalidOption,
    InvalidPayload,
    InvalidSchedule,
    InvalidTag,
    InvalidToken,
    JobDead,
    NotDurable,
    PayloadTooLarge,
    Permanent,
    RedisUnavailable,
    ResultExpired,
    ResultTimeout,
    ScriptError,
    UnknownJob,
)
from echomq.flow import FlowSettings, Rate
from echomq.inspection import JobInfo
from echomq.jobs import Claim, NewJob
from echomq.keyspace import Keyspace
from echomq.lanes import Claimed
from echomq.partitions import PartitionedBus, partition_of
from echomq.periodic import Scheduler
from echomq.periodic_sync import SyncScheduler
from echomq.schedules import Schedule, Tick, TickReport
from echomq.states import Admission, Control, Deletion, Failure, Finish, JobState, Lease, Release
from echomq.stats import LaneStats, Stats
from echomq.sweep import SweepReport
from echomq.sync import SyncBus
from echomq.worker.handler import Job, WorkerCounts
from echomq.worker.runner import Worker

__all__ = [
    "DEFAULT_TAG",
    "MAX_PAYLOAD",
    "Admission",
    "Bus",
    "Claim",
    "Claimed",
    "Completion",
    "Control",
    "DeadDeletion",
    "DeadRetry",
    "Deletion",
    "EchoMQError",
    "EffectRefused",
    "Effects",
    "Failure",
    "Finish",
    "FlowSettings",
    "InvalidEffect",
    "InvalidId",
    "InvalidInput",
    "InvalidLane",
    "InvalidOption",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidTag",
    "InvalidToken",
    "Job",
    "JobDead",
    "JobInfo",
    "JobState",
    "Keyspace",
    "LaneStats",
    "Lease",
    "NewJob",
    "NotDurable",
    "PartitionedBus",
    "PayloadTooLarge",
    "Permanent",
    "Rate",
    "RedisUnavailable",
    "Release",
    "ResultExpired",
    "ResultTimeout",
    "Schedule",
    "Scheduler",
    "ScriptError",
    "Settings",
    "Stats",
    "SweepReport",
    "SyncBus",
    "SyncScheduler",
    "Tick",
    "TickReport",
    "UnknownJob",
    "Worker",
    "WorkerCounts",
    "ids",
    "partition_of",
]
