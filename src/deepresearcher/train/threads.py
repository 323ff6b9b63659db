"""Torch's CPU thread count chosen by the speed it gets, for a machine other jobs share.

On a quiet 2-core VM the quickstart's SFT step runs ~1.8x faster on two torch threads than on one. When another
job keeps one core busy, two threads collapse: every parallel region waits for the thread that shares its core,
and the same step ran 7-8x *slower* than on one thread (SFT of the quickstart's model, one busy process beside
it: 953-1,053 tokens/s on two threads against 7,710-7,878 on one, alternated, 2-core VM, 2026-12-05). That is
the slow hour of issue #41 part 2. So on the CPU the SFT loop (``ThreadChooser``) and the quickstart's other
stages (``choose_threads``, before each) measure the candidate counts and keep the faster; on a quiet machine
they keep the default and cost a few probe steps. Threads change the order of float sums only: what is
learned is the same up to rounding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

logger = logging.getLogger(__name__)


def thread_candidates(default: int | None = None) -> list[int]:
    """The counts worth trying: torch's default (the cores it was given) and one thread; one count where the
    default is already one."""
    most = default if default is not None else torch.get_num_threads()
    return [most] if most <= 1 else [most, 1]


@dataclass
class ThreadChooser:
    """Chooses the thread count of a training loop from its own steps' speed (tokens per second).

    The loop calls :meth:`before_step`, runs its step, then :meth:`after_step` with the step's tokens. Each count
    is timed over ``window`` steps: the default first, then the other (a probe), and the faster is kept. The
    probe is repeated every ``probe_every`` steps, and at once when the kept count's speed falls under
    ``slow_ratio`` of the best it showed (another job started). A probe on a quiet machine costs ``window``
    steps at half speed every ``probe_every``: ~2% of SFT's time at 5 and 250. Away from the default count it
    probes twice as often, so a job that ended gives the cores back soon.
    """

    candidates: list[int] = field(default_factory=thread_candidates)
    window: int = 5
    probe_every: int = 250
    slow_ratio: float = 0.6
    margin: float = 1.1
    """A probed count must be this much faster to be kept (step lengths vary, so speeds are noisy)."""
    set_threads: Callable[[int], None] = torch.set_num_threads
    current: int = 0
    kept: int = 0
    switches: int = 0
    _rates: dict[int, float] = field(default_factory=dict)
    _best: dict[int, float] = field(default_factory=dict)
    _tokens: int = 0
    _seconds: float = 0.0
    _steps: int = 0
    _since_probe: int = 0
    _probing: bool = False
    _started: float = 0.0

    def __post_init__(self) -> None:
        self.current = self.kept = self.candidates[0]

    def before_step(self) -> None:
        self._started = time.perf_counter()

    def after_step(self, tokens: int, seconds: float | None = None) -> None:
        """Count one step of ``tokens`` (its seconds measured since :meth:`before_step` unless given)."""
        self._tokens += tokens
        self._seconds += seconds if seconds is not None else time.perf_counter() - self._started
        self._steps += 1
        self._since_probe += 1
        if self._steps < self.window or len(self.candidates) < 2:
            return
        rate = self._tokens / max(self._seconds, 1e-9)
        self._tokens, self._seconds, self._steps = 0, 0.0, 0
        self._rates[self.current] = rate
        if self.current not in self._best or not self._probing:
            self._best[self.current] = max(rate, self._best.get(self.current, 0.0))
        if self._probing:  # a probe window ended: keep whichever count was faster
            self._probing = False
            other = self.kept
            if rate > self.margin * self._rates.get(other, 0.0):
                logger.info("torch threads %d -> %d: %.0f against %.0f tokens/s", other, self.current, rate,
                            self._rates.get(other, 0.0))
                self.kept = self.current
                self.switches += 1
                self._best = {self.current: rate}
            else:
                self._use(self.kept)
            return
        slowed = rate < self.slow_ratio * self._best.get(self.current, rate)
        every = self.probe_every if self.kept == self.candidates[0] else max(self.probe_every // 2, self.window)
        if self._since_probe >= every or slowed or len(self._rates) < len(self.candidates):
            self._since_probe = 0
            self._probing = True
            self._use(next(c for c in self.candidates if c != self.current))

    def _use(self, threads: int) -> None:
        self.current = threads
        self.set_threads(threads)


def choose_threads(probe: Callable[[], float], candidates: list[int] | None = None, *, margin: float = 1.1,
                   set_threads: Callable[[int], None] = torch.set_num_threads) -> int:
    """Set (and return) the faster of ``candidates`` (default :func:`thread_candidates`) by ``probe`` (a short
    piece of work that returns its speed, higher faster) run at each; the first candidate unless another is
    ``margin`` times faster. For a stage that is not a loop of its own (an evaluation, a GRPO run)."""
    candidates = candidates or thread_candidates()
    rates = {}
    for threads in candidates:
        set_threads(threads)
        rates[threads] = probe()
    best = candidates[0]
    for threads in candidates[1:]:
        if rates[threads] > margin * rates[best]:
            best = threads
    set_threads(best)
    return best


def sft_probe(seconds: float = 0.5) -> Callable[[], float]:
    """A probe for :func:`choose_threads`: forward and backward passes of a small random Qwen2 of the quickstart's
    shape (128 wide, 4 layers) over 8 x 256 tokens, repeated for ``seconds``; returns tokens per second."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
        ids = torch.randint(2, 2048, (8, 256))

    def probe() -> float:
        model(input_ids=ids, labels=ids).loss.backward()  # warm-up at this thread count
        tokens, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            tokens += ids.numel()
        return tokens / (time.perf_counter() - start)

    return probe
