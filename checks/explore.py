"""Steer a spec's first draws to every alternative of every choice point, then to pairs.

Left to itself, Hypothesis favours the first alternative of a choice (its lower bound), so an
option a spec offers at its fourth ``oneof`` position or behind a ``random_bool`` may never be
drawn in twenty draws. The :class:`Explorer` watches the choice points each draw makes
(:mod:`alignbot.checks.choice_points`) and steers the next ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from .choice_points import ChoicePoint, Key

Pair = tuple[Key, int, Key, int]
Choice = int | float
TRIES = 2  # draws steered by the picks before a point, then one by the whole path to it
MAX_MISSED = 100  # labels a spec's summary names; the counts still say how many


@dataclass
class Steering:
    """What one draw must pick: alternatives by choice point, and ``path``, the choices that
    follow the program seed (sizes, values, picks) replayed as they were; ``free``: every
    other choice is drawn at random from the program seed, not by Hypothesis, whose first
    test cases are its simplest (each choice at its lower bound: one-element tensors, zero
    values), which would leave each steered option to meet only those."""

    plan: dict[Key, int] = field(default_factory=dict)
    path: list[Choice] = field(default_factory=list)
    free: bool = False


@dataclass
class Exploration:
    """What one spec's draws exercised: alternatives of its choice points seen and drawn, and
    labels of those never drawn (``reductions.py:42 oneof[2]``), in the order first seen."""

    spec: str
    seen: int = 0
    drawn: int = 0
    missed: list[str] = field(default_factory=list)
    # (op, dtype) of every call the draws made to one of the spec's ops, sorted
    covered: list[tuple[str, str]] = field(default_factory=list)


class Explorer:
    """Plans the steering of one spec's draws, from the choice points of the draws before.

    Phases, each draw in the first that still has work: (1) every alternative of every
    choice point seen so far: a point still missing some is forced to the first it misses,
    together with the picks that came before it in the draw where it was last seen (a point
    that only exists behind another's alternative needs that alternative again); after
    ``TRIES`` such draws without it, one draw replays the whole path of choices that led to
    it (a point may hide behind a drawn size, not a pick); (2) pairs of
    alternatives of points that occur together, chosen greedily point by point, while the
    draw is in the first three quarters of ``n``; (3) Hypothesis' own draws. In phases (1)
    and (2) every choice not steered is drawn at random from the program seed
    (:attr:`Steering.free`), but in the first draw, which stays Hypothesis' simplest program
    (the smallest sizes and values: an edge case of its own). A draw is steered only when
    its program seed is new: Hypothesis' data tree allows a forced choice only where no
    earlier test case made that choice unforced, and a new seed (the first choice) starts a
    fresh branch of it. The plan depends on earlier draws alone, so a run stays fixed by its
    seed. ``steer`` False only watches (to measure what free draws exercise).
    """

    def __init__(self, n: int, steer: bool = True) -> None:
        self.n, self.steer = n, steer
        self.draws = 0
        self.order: list[Key] = []  # choice points in the order first seen
        self.rank: dict[Key, int] = {}
        self.tries: dict[tuple[Key, int], int] = {}
        self.alternatives: dict[Key, tuple[str, ...]] = {}
        self.labels: dict[Key, ChoicePoint] = {}
        self.drawn: dict[Key, set[int]] = {}
        self.context: dict[Key, dict[Key, int]] = {}
        self.paths: dict[Key, list[Choice]] = {}
        self.together: set[tuple[Key, Key]] = set()
        self.pairs: set[Pair] = set()
        self.seeds: set[int] = set()

    def steering(self, program_seed: int) -> Steering:
        """What the draw with this program seed must pick."""
        if program_seed in self.seeds or not self.steer:
            return Steering()
        self.seeds.add(program_seed)
        plan = self._cover_alternatives()
        if plan:
            return Steering(plan, free=True)
        steering = self._follow_path()
        if steering is None and self.draws < self.n * 3 // 4:
            return Steering(self._cover_pairs(), free=self.draws > 0)
        return steering or Steering()

    def record(self, points: list[ChoicePoint], choices: list[Choice]) -> None:
        """The choice points one draw made, in the order it made them, and its choices."""
        self.draws += 1
        before: dict[Key, int] = {}
        for point in points:
            key = point.key
            if key not in self.alternatives:
                self.rank[key] = len(self.order)
                self.order.append(key)
                self.alternatives[key] = point.alternatives
                self.labels[key] = point
                self.drawn[key] = set()
            if len(point.alternatives) == len(self.alternatives[key]):
                self.drawn[key].add(point.picked)
            self.context[key] = dict(before)
            self.paths[key] = list(choices[1:point.position])
            before[key] = point.picked
        for (a, x), (b, y) in combinations(sorted(before.items(), key=self._rank), 2):
            self.together.add((a, b))
            self.pairs.add((a, x, b, y))

    def summary(self, spec: str) -> Exploration:
        result = Exploration(spec)
        for key in self.order:
            count = len(self.alternatives[key])
            result.seen += count
            result.drawn += len(self.drawn[key])
            result.missed += [self.labels[key].label(a) for a in range(count)
                              if a not in self.drawn[key]]
        del result.missed[MAX_MISSED:]
        return result

    def _rank(self, item: tuple[Key, int]) -> int:
        return self.rank[item[0]]

    def _missing(self, key: Key, tries: int = TRIES) -> list[int]:
        """Alternatives not drawn yet, steered to fewer than ``tries`` times."""
        return [a for a in range(len(self.alternatives[key]))
                if a not in self.drawn[key] and self.tries.get((key, a), 0) < tries]

    def _follow_path(self) -> Steering | None:
        """The first alternative that its picks did not bring back, by its whole path."""
        for key in self.order:
            missing = self._missing(key, TRIES + 1)
            if missing:
                self.tries[(key, missing[0])] = TRIES + 1
                return Steering({key: missing[0]}, self.paths[key], free=True)
        return None

    def _cover_alternatives(self) -> dict[Key, int]:
        plan: dict[Key, int] = {}
        for key in self.order:
            missing = self._missing(key)
            if not missing or key in plan:
                continue
            context = self.context[key]
            if any(plan.get(k, v) != v for k, v in context.items()):
                continue  # needs picks this draw already made otherwise: a later draw
            plan.update(context)
            plan[key] = missing[0]
            self.tries[(key, missing[0])] = self.tries.get((key, missing[0]), 0) + 1
        return plan

    def _cover_pairs(self) -> dict[Key, int]:
        plan: dict[Key, int] = {}
        for key in self.order:
            best, best_gain = 0, 0
            for alternative in range(len(self.alternatives[key])):
                gain = self._gain(key, alternative, plan)
                if gain > best_gain:
                    best, best_gain = alternative, gain
            if best_gain:
                plan[key] = best
        return plan

    def _gain(self, key: Key, alternative: int, plan: dict[Key, int]) -> int:
        """Pairs not drawn yet that picking ``alternative`` at ``key`` would draw: with the
        points planned so far, or (for the first point planned) with any it occurs with."""
        gain = 0
        rank = self.rank[key]
        others = plan.items() if plan else [
            (k, v) for k in self.order for v in range(len(self.alternatives[k]))]
        for other, value in others:
            if other == key:
                continue
            first = self.rank[other] < rank
            a, b = (other, key) if first else (key, other)
            x, y = (value, alternative) if first else (alternative, value)
            if (a, b) in self.together and (a, x, b, y) not in self.pairs:
                gain += 1
        return gain
