"""``maskc audit``: tokenizer-boundary hazards, for a tokenizer alone and for a grammar on it.

``tokenizer.py`` reports what a vocabulary holds (tokens that carry JSON structure with
other bytes, whitespace runs, partial UTF-8, byte fallback, special tokens, duplicates,
normalizers, EOS candidates); ``grammar.py`` reports, per state of a compiled grammar, the
tokens a first-byte mask would admit that break the grammar (the smugglers) and the other
hazards that need the automaton. Both return :class:`~maskc.compiler.findings.Finding` lists
plus tables of counts; rendering is the CLI's.
"""

from __future__ import annotations

from maskc.compiler.audit.facts import TokenizerFacts, tokenizer_facts
from maskc.compiler.audit.grammar import GrammarAudit, GrammarTables, audit_grammar
from maskc.compiler.audit.tokenizer import TokenizerAudit, audit_tokenizer

__all__ = ["GrammarAudit", "GrammarTables", "TokenizerAudit", "TokenizerFacts", "audit_grammar", "audit_tokenizer",
           "tokenizer_facts"]
