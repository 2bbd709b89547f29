"""``maskc bench`` as a library: engines side by side on the same schemas and tokenizer.

:mod:`.engines` puts maskc and its peers (XGrammar, llguidance, outlines-core; each
optional) behind one interface; :mod:`.instances` reads schema files and their instances
and draws random walks; :mod:`.runner` runs each engine in a child process under a time
and memory limit; :mod:`.suite` runs the schemas and summarizes them as data.
"""

from __future__ import annotations

from maskc.artifacts.bench.engines import ENGINES, PEERS, Engine, EngineMatcher, make_engine, missing_hint
from maskc.artifacts.bench.instances import (
    Case,
    Instance,
    default_inputs,
    expand_paths,
    load_case,
    maskbench_location,
    random_walks,
)
from maskc.artifacts.bench.runner import MEMORY_METHOD, EngineResult, EngineWorker, Job, TokenizerSpec, measure
from maskc.artifacts.bench.serialize import serialize
from maskc.artifacts.bench.suite import METRICS, BenchSettings, run_bench, stats, summarize

__all__ = [
    "ENGINES",
    "MEMORY_METHOD",
    "METRICS",
    "PEERS",
    "BenchSettings",
    "Case",
    "Engine",
    "EngineMatcher",
    "EngineResult",
    "EngineWorker",
    "Instance",
    "Job",
    "TokenizerSpec",
    "default_inputs",
    "expand_paths",
    "load_case",
    "make_engine",
    "maskbench_location",
    "measure",
    "missing_hint",
    "random_walks",
    "run_bench",
    "serialize",
    "stats",
    "summarize",
]
