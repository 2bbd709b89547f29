"""``maskc audit``: the tokenizer-boundary hazards of a tokenizer, and of grammars on it.

Without inputs: the tokenizer report (:func:`~maskc.compiler.audit.tokenizer.audit_tokenizer`).
With schemas, GBNF grammars or artifacts: each is compiled (through the cache) or loaded, and
its tables audited (:func:`~maskc.compiler.audit.grammar.audit_grammar`) — an artifact is
audited as it is, the tables its matcher runs. The findings are facts about the tokenizer and
the grammar (maskc's masks already reject smugglers), so only an ``error`` (a state decoding
reaches with no token to write) fails the default ``--fail-on``.
Exit code: 0, 1 a finding at ``--fail-on``, 2 bad invocation or an unreadable input, 3 internal.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

import maskc
from maskc.cli import audit_render
from maskc.cli.audit_render import GrammarReport
from maskc.cli.errors import EXIT_FAILED, EXIT_INTERNAL, describe, describe_internal, guard, rule_for
from maskc.cli.findings import FailOn
from maskc.cli.grammar import load_grammar
from maskc.cli.options import DEFAULT_TOKENIZER, FormatOpt, JsonOpt, LenientOpt, NoCacheOpt, OutputFormat, \
    TokenizerOpt, WhitespaceOpt, resolve_format
from maskc.cli.output import Output
from maskc.compiler.audit.grammar import audit_grammar
from maskc.compiler.audit.tokenizer import audit_tokenizer
from maskc.compiler.errors import MaskcError
from maskc.compiler.findings import severity_at_least
from maskc.compiler.vocab import Vocabulary

__all__ = ["EPILOG", "audit_command"]

EPILOG = """\
[bold]Examples[/]

  maskc audit --tokenizer deepseek
  maskc audit --tokenizer ./Qwen2.5-7B-Instruct order.json invoice.json --show 10
  maskc audit -t model.gguf maskc-artifacts/order-3f2a9c1e.safetensors --json
  maskc audit -t deepseek grammar.gbnf --fail-on warning
"""


def _audit_one(path: str, vocab: Vocabulary, show: int, whitespace: str, lenient: bool,
               cache: bool) -> tuple[GrammarReport, int]:
    """The report of one input and the exit code its error calls for (0 when none)."""
    try:
        art = load_grammar(path, None, vocab, whitespace=whitespace, lenient=lenient, cache=cache)
        t0 = time.perf_counter()
        audit = audit_grammar(art, vocab, show=show)
        return GrammarReport(path, art.grammar_kind, audit, time.perf_counter() - t0), 0
    except MaskcError as e:
        return GrammarReport(path, error=describe(e)), rule_for(e).code
    except Exception as e:  # noqa: BLE001  (a bug: reported for this input, the others go on)
        return GrammarReport(path, error=describe_internal(e)), EXIT_INTERNAL


@guard
def audit_command(
    inputs: Annotated[list[str] | None, typer.Argument(
        metavar="SCHEMA|GRAMMAR|ARTIFACT", show_default=False,
        help="JSON Schema files, .gbnf grammars or .safetensors artifacts to audit on the tokenizer "
             "(none: the tokenizer report only).")] = None,
    tokenizer: TokenizerOpt = DEFAULT_TOKENIZER,
    show: Annotated[int, typer.Option("--show", "-n", min=0, metavar="N",
                                      help="How many examples to list per category and state kind.")] = 5,
    fail_on: Annotated[FailOn, typer.Option(
        help="Exit 1 when a finding is this serious or more. Smugglers and boundary tokens are "
             "info: maskc's masks handle them.")] = "error",
    whitespace: WhitespaceOpt = "compact",
    lenient: LenientOpt = False,
    no_cache: NoCacheOpt = False,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Audit a tokenizer for tokens that break naive masks, and grammars on it for smugglers,
    boundary tokens, whitespace-only, EOS-only and unspellable states, and forced strings."""
    chosen: OutputFormat = resolve_format(fmt, json_flag)
    out = Output(chosen)
    vocab = maskc.load_tokenizer(tokenizer)
    tok_audit = audit_tokenizer(vocab, source=tokenizer, show=show)
    reports: list[GrammarReport] = []
    worst = 0
    with out.progress(len(inputs or []), "auditing") as bar:
        for path in inputs or []:
            bar.working_on(path)
            report, code = _audit_one(path, vocab, show, whitespace, lenient, not no_cache)
            reports.append(report)
            worst = max(worst, code)
            bar.advance()
    if chosen == "json":
        out.document(audit_render.audit_document(tok_audit, reports, fail_on))
    else:
        audit_render.render_audit(out, tok_audit, reports)
    if worst:
        raise typer.Exit(worst)
    found = audit_render.findings_of(tok_audit, reports)
    if fail_on != "never" and any(severity_at_least(f.severity, fail_on) for f in found):
        raise typer.Exit(EXIT_FAILED)
