"""Thread blocks and channels for a planned MSCCL program, within the runtime's limits.

MSCCL runs every thread block (tb) of a GPU as one CUDA block that executes its steps in
order; a tb has at most one send peer and one receive peer, and the messages of a
(sender, receiver, channel) connection are matched in order. So:

* **Order.** Chains (see :mod:`canopy.engine.msccl.lowering`) get one global order π, a
  topological order of "chain A waits on a step of chain B" taken smallest priority first.
  Every tb lists its steps by (π of the chain, position in the chain), on both ends of
  every connection. Then the earliest unfinished chain can always run to its end: its
  steps' predecessors in their tbs, the data they wait for and the earlier messages on
  their connections all belong to earlier chains. By induction no program deadlocks, even
  when a connection buffers a single message.
* **Channels.** All steps of a chain share one channel, because a fused step (receive and
  send in one step) lives in one tb and a tb has one channel. On a GPU, a channel can hold
  one tb per (peer, direction), so the fused (receive peer, send peer) pairs of a channel
  must form a matching. A chain takes the first of the ``spread`` preferred channels that
  holds all of it, else the one that holds the longest part; there the chain is cut: the
  fused step becomes a receive and a dependent send, and the rest is placed as a chain of
  its own at the same place in π (so the argument above still holds); the transfers
  feeding the cut are relabelled with its slot. More channels are
  opened only when the step and thread block limits require them.
* **Thread blocks.** On each (GPU, channel), every fused pair is a tb; the remaining
  receive-only and send-only peers are paired into shared tbs while they fit, to spare
  thread blocks (each occupies an SM). Local copies go first in the GPU's smallest tbs, as
  many as fit, then in tbs of their own.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from canopy.engine.model.errors import ScheduleError
from canopy.engine.msccl.lowering import Chain, Step, StepProgram, relabel


@dataclass(frozen=True)
class MscclLimits:
    """The MSCCL/RCCL runtime's limits (msccl.h: MSCCL_MAX_NUM_STEPS = 256,
    MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL = 32, MAXCHANNELS = 32, MSCCL_MAX_COUNT = 72;
    the parser rejects ``cnt >= MSCCL_MAX_COUNT``, so the largest ``cnt`` is 71). The
    parser (msccl_parser.h, MAX_NODES = 4096) reads a rank's view of the file into a
    table of 4096 elements and fails once the table is full while the document goes on:
    so at most 4095 elements, counted by :func:`parser_elements` (the ``algo`` element,
    every ``gpu`` element, and the rank's own thread blocks and steps; other ranks' are
    skipped).

    ``max_tbs_per_gpu`` is the GPU's SM count: the interpreter launches one CUDA block per
    thread block and blocks spin on each other's steps, so all must be resident at once,
    one per SM. msccl.h's own bound, MSCCL_MAX_NUM_THREAD_BLOCKS = 216, is twice the 108
    SMs of an A100 (its comment: "set this to 108 which is the number of SMs on A100");
    an MI250 GCD has 104 compute units, an H100 SXM 132 SMs. The default, 108, suits
    A100 clusters; set it to the GPU's count for others."""

    max_steps_per_tb: int = 256
    max_tbs_per_channel: int = 32
    max_channels: int = 32
    max_count: int = 71
    max_elements_per_gpu: int = 4095
    max_tbs_per_gpu: int = 108


def parser_elements(ngpus: int, tbs: int, steps: int) -> int:
    """XML elements the runtime's parser keeps for one rank: ``<algo>``, all ``ngpus``
    ``<gpu>`` elements, and that rank's ``tbs`` thread blocks and ``steps`` steps."""
    return 1 + ngpus + tbs + steps


class MscclLimitError(ScheduleError):
    """The program cannot be laid out within :class:`MscclLimits`."""


@dataclass(eq=False)
class ThreadBlock:
    send: int
    recv: int
    channel: int
    steps: list[Step] = field(default_factory=list)

    @property
    def route(self) -> tuple[str, ...]:
        """The physical route of the thread block's send connection: the route of the
        plan's tree edges it sends over (the one carrying most chunks where a shared
        connection carries edges routed differently; first in step order on a tie)."""
        chunks: dict[tuple[str, ...], int] = {}
        for step in self.steps:
            if step.send_peer >= 0 and step.route:
                chunks[step.route] = chunks.get(step.route, 0) + step.cnt
        return max(chunks, key=chunks.__getitem__, default=())


@dataclass
class ThreadBlockAssignment:
    """Thread blocks of every rank, ids in list order, steps in execution order."""

    plan: StepProgram
    tbs: list[list[ThreadBlock]]

    @property
    def nchannels(self) -> int:
        return max((tb.channel + 1 for rank in self.tbs for tb in rank), default=1)


def order_chains(chains: list[Chain]) -> list[Chain]:
    """A topological order of the chains (a chain after those its steps wait on), taking
    the smallest priority among the ready chains first."""
    waits_on: dict[Chain, set[Chain]] = {c: set() for c in chains}
    for chain in chains:
        for step in chain.steps:
            other = step.dep.chain if step.dep is not None else None
            if other is not None and other is not chain:
                waits_on[chain].add(other)
    unlocks: dict[Chain, list[Chain]] = defaultdict(list)
    for chain, deps in waits_on.items():
        for dep in deps:
            unlocks[dep].append(chain)
    seq = {c: i for i, c in enumerate(chains)}
    missing = {c: len(d) for c, d in waits_on.items()}
    heap = [(c.priority, seq[c]) for c in chains if missing[c] == 0]
    heapq.heapify(heap)
    order: list[Chain] = []
    while heap:
        _, i = heapq.heappop(heap)
        chain = chains[i]
        order.append(chain)
        for nxt in unlocks[chain]:
            missing[nxt] -= 1
            if missing[nxt] == 0:
                heapq.heappush(heap, (nxt.priority, seq[nxt]))
    if len(order) != len(chains):
        raise AssertionError("chain dependencies form a cycle")
    return order


Journal = list[tuple[dict, object, object]]     # (table, key, value before) per change
_ABSENT = object()                               # a key the table did not have


def _note(journal: Journal | None, table: dict, key: object) -> None:
    """Remember ``table[key]`` (or that it had no such key) before it changes."""
    if journal is not None:
        journal.append((table, key, table.get(key, _ABSENT)))


def _undo(journal: Journal, mark: int) -> None:
    """Take back the changes ``journal`` noted from ``mark`` on, latest first."""
    for table, key, value in reversed(journal[mark:]):
        if value is _ABSENT:
            del table[key]
        else:
            table[key] = value
    del journal[mark:]


class _Channel:
    """Bookkeeping of one (rank, channel): fused pairs and step counts per peer. An
    ``unpaired`` channel gives receive-only and send-only peers thread blocks of their own
    (no chain waits behind another's steps in a shared thread block). Changes go to a
    journal where one is given, so trial placements can be taken back (:func:`_undo`)."""

    def __init__(self, unpaired: bool = False) -> None:
        self.unpaired = unpaired
        self.pair_of_recv: dict[int, int] = {}
        self.pair_of_send: dict[int, int] = {}
        self.recv_steps: dict[int, int] = defaultdict(int)
        self.send_steps: dict[int, int] = defaultdict(int)
        self.fused_steps: dict[tuple[int, int], int] = defaultdict(int)

    def fits(self, limits: MscclLimits, journal: Journal | None = None) -> bool:
        """Whether the thread blocks this channel needs stay within ``limits``: one per
        fused pair, and the unpaired receive and send peers paired up among themselves.
        (A pair's send peer without steps yet is counted from here on with none.)"""
        limit = limits.max_steps_per_tb
        for p, n in self.recv_steps.items():
            s = self.pair_of_recv.get(p)
            if s is None:
                size = n
            else:
                if s not in self.send_steps:
                    _note(journal, self.send_steps, s)
                if (p, s) not in self.fused_steps:
                    _note(journal, self.fused_steps, (p, s))
                size = n + self.send_steps[s] - self.fused_steps[(p, s)]
            if size > limit:
                return False
        if any(n > limit for s, n in self.send_steps.items() if s not in self.pair_of_send):
            return False
        pairs = len(self.pair_of_recv)
        if self.unpaired:
            alone = len(self.recv_steps) + len(self.send_steps) - 2 * pairs
        else:
            alone = max(len(self.recv_steps), len(self.send_steps)) - pairs
        return pairs + alone <= limits.max_tbs_per_channel

    def add(self, step: Step, exclusive: bool = False, journal: Journal | None = None
            ) -> bool:
        """Record ``step``; False when its fused pair clashes with an existing one, or, if
        ``exclusive``, when another chain already uses one of its connections."""
        p, s = step.recv_peer, step.send_peer
        if exclusive and (self.recv_steps.get(p) or self.send_steps.get(s)):
            return False
        if p >= 0 and s >= 0:
            if self.pair_of_recv.get(p, s) != s or self.pair_of_send.get(s, p) != p:
                return False
            _note(journal, self.pair_of_recv, p)
            self.pair_of_recv[p] = s
            _note(journal, self.pair_of_send, s)
            self.pair_of_send[s] = p
            _note(journal, self.fused_steps, (p, s))
            self.fused_steps[(p, s)] += 1
        if p >= 0:
            _note(journal, self.recv_steps, p)
            self.recv_steps[p] += 1
        if s >= 0:
            _note(journal, self.send_steps, s)
            self.send_steps[s] += 1
        return True


def _with_peers(steps: list[Step]) -> list[Step]:
    return [step for step in steps if step.recv_peer >= 0 or step.send_peer >= 0]


def _is_fused(step: Step) -> bool:
    return step.recv_peer >= 0 and step.send_peer >= 0


class _Channels:
    """Channel bookkeeping of all ranks, with trial placements that can be undone."""

    def __init__(self, limits: MscclLimits, connections: str) -> None:
        self.limits = limits
        self.connections = connections
        self.exclusive = connections not in ("shared", "given")
        self.state: dict[tuple[int, int], _Channel] = defaultdict(
            lambda: _Channel(unpaired=connections != "shared"))

    def reach(self, steps: list[Step], ch: int, fuse: bool, keep: bool = False) -> int | None:
        """How much of ``steps`` channel ``ch`` takes: ``len(steps)`` for all of it, j ≥ 1
        to split the fused step j (its receive still fits here), None for nothing. The
        trial is taken back, but with ``keep`` where the channel takes all of ``steps``:
        then they are placed there, as :meth:`commit` would place them."""
        journal: Journal = []
        result: int | None = len(steps)
        for j, step in enumerate(steps):
            if not (step.recv_peer >= 0 or step.send_peer >= 0):
                continue
            if (fuse or not _is_fused(step)) and self._add(step, ch, journal):
                continue
            result = None
            if j >= 1 and _is_fused(step):
                receive = Step(step.rank, "r", step.cnt, recv_peer=step.recv_peer)
                if self._add(receive, ch, journal):
                    result = j
            break
        if not (keep and result == len(steps)):
            _undo(journal, 0)
        return result

    def _add(self, step: Step, ch: int, journal: Journal) -> bool:
        state = self.state[(step.rank, ch)]
        mark = len(journal)
        if state.add(step, self.exclusive, journal) and state.fits(self.limits, journal):
            return True
        _undo(journal, mark)
        return False

    def commit(self, steps: list[Step], ch: int) -> None:
        for step in _with_peers(steps):
            added = self._add(step, ch, [])
            assert added, "a trial placement did not hold"

    def choose(self, steps: list[Step], fuse: bool, spread: int) -> tuple[int, int] | None:
        """(channel, reach): the first of the ``spread`` preferred channels that takes all of
        ``steps``, else the one that takes most; beyond them, the first that takes any.
        With connections ``"prefer-own"``, first the first channel where ``steps`` have
        their connections to themselves, else as ``"shared"``. With ``"given"``, the
        channel the plan gives the first transfer (no fused steps). Where the channel
        takes all of ``steps`` they are placed there; else nothing is (:meth:`commit`)."""
        if self.connections == "given":
            sending = [step for step in steps if step.send_peer >= 0]
            ch = sending[0].channel if sending and sending[0].channel is not None else 0
            reach = self.reach(steps, ch, False, keep=True)
            return None if reach is None else (ch, reach)
        if self.connections == "prefer-own":
            self.exclusive = True
            found = self._choose(steps, fuse, self.limits.max_channels)
            self.exclusive = found is not None and found[1] == len(steps)
            if self.exclusive:
                return found
        return self._choose(steps, fuse, spread)

    def _choose(self, steps: list[Step], fuse: bool, spread: int) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        for ch in range(min(spread, self.limits.max_channels)):
            reach = self.reach(steps, ch, fuse, keep=True)
            if reach == len(steps):
                return ch, reach
            if reach is not None and (best is None or reach > best[1]):
                best = (ch, reach)
        if best is not None:
            return best
        for ch in range(spread, self.limits.max_channels):
            reach = self.reach(steps, ch, fuse, keep=True)
            if reach is not None:
                return ch, reach
        return None


def _paired(plan: StepProgram, channels: _Channels) -> _Channels:
    """``channels`` with the thread blocks the plan pairs."""
    for rank, p, s, ch in plan.paired:
        channels.state[(rank, ch)].pair_of_recv[p] = s
        channels.state[(rank, ch)].pair_of_send[s] = p
    return channels


def _given_cuts(plan: StepProgram, order: list[Chain], limits: MscclLimits
                ) -> tuple[list[list[tuple[int, int]]], _Channels] | None:
    """Under ``"given"`` channels, the (channel, reach) :meth:`_Channels.choose` gives each
    piece of each chain in order, and the channels holding them all, worked out by counting;
    None where :func:`_assign_channels` would find a piece it cannot place (then it places
    them one by one and says where). Given channels fuse nothing: every fused step past a
    piece's first is split, and a piece goes on the channel of its first send. No pair forms
    as steps are added, so every count of a channel (steps per thread block, thread blocks)
    only grows: where the channels fit with every step placed, each placement fitted."""
    channels = _paired(plan, _Channels(limits, "given"))
    state = channels.state
    touched: set[tuple[int, int]] = set()
    cuts: list[list[tuple[int, int]]] = []
    for chain in order:
        steps, pieces = chain.steps, []
        start, half = 0, False    # the piece starts at steps[start] (its send half if ``half``)
        while start < len(steps):
            first = steps[start]
            if half:
                sender: Step | None = first
            else:
                sender = next((st for st in steps[start:] if st.send_peer >= 0), None)
            ch = sender.channel if sender is not None and sender.channel is not None else 0
            reach = len(steps) - start
            for j in range(start, len(steps)):
                step = steps[j]
                p = -1 if half and j == start else step.recv_peer
                s = step.send_peer
                fused = p >= 0 and s >= 0
                if fused:
                    if j == start:
                        return None
                    reach, s = j - start, -1      # its receive ends this piece
                if p >= 0 or s >= 0:
                    key = (step.rank, ch)
                    touched.add(key)
                    if p >= 0:
                        state[key].recv_steps[p] += 1
                    if s >= 0:
                        state[key].send_steps[s] += 1
                if fused:
                    break
            pieces.append((ch, reach))
            start, half = start + reach, True
        cuts.append(pieces)
    if all(state[key].fits(limits) for key in touched):
        return cuts, channels
    return None


def _assign_channels(plan: StepProgram, order: list[Chain], limits: MscclLimits, fuse: bool,
                     spread: int, connections: str
                     ) -> tuple[list[Chain], dict[Chain, int], dict[tuple[int, int], _Channel]]:
    """Channels for the chains in order. Where a fused step's (receive, send) pair cannot
    join the chain's channel, the step is split into a receive and a dependent send and the
    rest of the chain goes on as a chain of its own; without ``fuse`` every fused step is
    split. The pieces keep the chain's place in the order."""
    given = _given_cuts(plan, order, limits) if connections == "given" else None
    channels = given[1] if given is not None else \
        _paired(plan, _Channels(limits, connections))
    waiting: dict[Step, list[Step]] = defaultdict(list)     # the steps on each fused one
    for chain in order:
        for step in chain.steps:
            if step.dep is not None and _is_fused(step.dep):
                waiting[step.dep].append(step)
    channel_of: dict[Chain, int] = {}
    placed: list[Chain] = []
    for n, chain in enumerate(order):
        steps = list(chain.steps)
        counted = iter(given[0][n]) if given is not None else None
        while steps:
            choice = next(counted) if counted is not None else \
                channels.choose(steps, fuse, spread)
            if choice is None:
                first = _with_peers(steps)[0]
                raise MscclLimitError(
                    f"the MSCCL program does not fit the runtime's limits: rank {first.rank} "
                    f"would need more than {limits.max_channels} channels to keep each "
                    f"thread block within {limits.max_steps_per_tb} steps and each channel "
                    f"within {limits.max_tbs_per_channel} thread blocks.")
            ch, reach = choice
            whole = reach == len(steps)         # then the choice placed them
            if whole:
                head, steps = steps, []
            else:
                fused = steps[reach]
                receive, send = plan.split(fused)
                for step in waiting.pop(fused, []):
                    step.dep = receive
                relabel(steps[:reach], receive.dst)
                head, steps = [*steps[:reach], receive], [send, *steps[reach + 1:]]
            piece = Chain(head, chain.priority)
            for step in head:
                step.chain = piece
            if not whole and counted is None:
                channels.commit(head, ch)
            channel_of[piece] = ch
            placed.append(piece)
    return placed, channel_of, channels.state


def _rank_threadblocks(channels: dict[int, _Channel], steps: list[Step],
                       channel_of: dict[Chain, int], limits: MscclLimits
                       ) -> list[ThreadBlock]:
    """One rank's thread blocks, each listing its steps in execution order."""
    tbs: list[ThreadBlock] = []
    by_recv: dict[tuple[int, int], ThreadBlock] = {}
    by_send: dict[tuple[int, int], ThreadBlock] = {}
    for ch, state in sorted(channels.items()):
        for p, s in sorted(state.pair_of_recv.items()):
            tb = ThreadBlock(s, p, ch)
            tbs.append(tb)
            by_recv[(p, ch)] = by_send[(s, ch)] = tb
        recv_only = sorted((n, p) for p, n in state.recv_steps.items()
                           if p not in state.pair_of_recv)
        send_only = sorted(((n, s) for s, n in state.send_steps.items()
                            if s not in state.pair_of_send), reverse=True)
        for n, p in recv_only:
            tb = ThreadBlock(-1, p, ch)
            for i, (m, s) in enumerate(send_only):
                if n + m <= limits.max_steps_per_tb and not state.unpaired:
                    tb.send = s
                    by_send[(s, ch)] = tb
                    del send_only[i]
                    break
            tbs.append(tb)
            by_recv[(p, ch)] = tb
        for _, s in send_only:
            tb = ThreadBlock(s, -1, ch)
            tbs.append(tb)
            by_send[(s, ch)] = tb
    copies = []
    for step in steps:
        assert step.chain is not None, "every placed step belongs to a chain"
        ch = channel_of[step.chain]
        if step.recv_peer >= 0:
            by_recv[(step.recv_peer, ch)].steps.append(step)
        elif step.send_peer >= 0:
            by_send[(step.send_peer, ch)].steps.append(step)
        else:
            copies.append(step)
    unpaired = any(state.unpaired for state in channels.values())
    for tb in sorted(tbs, key=lambda t: len(t.steps)) if not unpaired else []:
        room = limits.max_steps_per_tb - len(tb.steps)
        if copies and room > 0:
            tb.steps[:0], copies = copies[:room], copies[room:]
    while copies:
        tb = ThreadBlock(-1, -1, 0, copies[:limits.max_steps_per_tb])
        copies = copies[limits.max_steps_per_tb:]
        tbs.append(tb)
    tbs.sort(key=lambda t: (t.send, t.recv, t.channel))
    return tbs


def _plan_order(chain: Chain) -> tuple:
    """Where a placed piece goes in its thread blocks under ``"given"`` channels: the plan's
    order of its transfer (:func:`canopy.engine.execution.compiler.plan_program`), input copies
    first, other local steps last."""
    for step in chain.steps:
        if step.send_peer >= 0:
            return (1, step.order)
    return (0,) if all(step.dep is None for step in chain.steps) else (2,)


def assign_threadblocks(plan: StepProgram, limits: MscclLimits = MscclLimits(), fuse: bool = True,
                        spread: int = 1, connections: str = "shared"
                        ) -> ThreadBlockAssignment:
    """Order the plan's chains, give each a channel, and group steps into thread blocks.
    Without ``fuse``, every relay receives, then sends in a dependent step: fewer thread
    blocks and channels, but no receive-and-forward pipelining within a step.
    ``connections``: ``"shared"`` lets chains share connections and thread blocks;
    ``"own"`` gives every chain connections (peer, direction, channel) and thread blocks of
    its own, so no chain waits behind another's steps; ``"prefer-own"`` does so while
    channels last and shares beyond; ``"given"`` puts every transfer on the channel its
    step names (the plan's, :func:`canopy.engine.deploy.runtime_choice.runtime_layout`), one
    thread block per connection, and orders each connection's transfers as the plan's
    simulation does: by the plan's order, then the chains' (a topological order, since a
    transfer's order only grows along the steps it waits on).

    Raises :class:`MscclLimitError` when the runtime's limits cannot be met.
    """
    if connections == "given":
        fuse = False
    order, channel_of, state = _assign_channels(plan, order_chains(plan.chains), limits, fuse,
                                                spread, connections)
    if connections == "given":
        order.sort(key=_plan_order)         # (stable: the chains' order among equals)
    per_rank_steps: list[list[Step]] = [[] for _ in range(plan.ngpus)]
    for chain in order:
        for step in chain.steps:
            per_rank_steps[step.rank].append(step)
    per_rank_channels: list[dict[int, _Channel]] = [{} for _ in range(plan.ngpus)]
    for (rank, ch), st in state.items():
        if st.recv_steps or st.send_steps:
            per_rank_channels[rank][ch] = st
    tbs = [_rank_threadblocks(per_rank_channels[r], per_rank_steps[r], channel_of, limits)
           for r in range(plan.ngpus)]
    for rank, rank_tbs in enumerate(tbs):
        counts: dict[int, int] = defaultdict(int)
        for tb in rank_tbs:
            counts[tb.channel] += 1
        worst = max(counts.values(), default=0)
        if worst > limits.max_tbs_per_channel:
            raise MscclLimitError(
                f"the MSCCL program does not fit the runtime's limits: rank {rank} needs "
                f"{worst} thread blocks on one channel, more than "
                f"{limits.max_tbs_per_channel}.")
        if len(rank_tbs) > limits.max_tbs_per_gpu:
            raise MscclLimitError(
                f"the MSCCL program does not fit the runtime's limits: rank {rank} needs "
                f"{len(rank_tbs)} thread blocks, more than the GPU's "
                f"{limits.max_tbs_per_gpu} SMs.")
        elements = parser_elements(plan.ngpus, len(rank_tbs),
                                   sum(len(tb.steps) for tb in rank_tbs))
        if elements > limits.max_elements_per_gpu:
            raise MscclLimitError(
                f"the MSCCL program does not fit the runtime's limits: rank {rank} needs "
                f"{elements} XML elements, more than the {limits.max_elements_per_gpu} "
                "RCCL's parser holds per GPU.")
    return ThreadBlockAssignment(plan, tbs)
