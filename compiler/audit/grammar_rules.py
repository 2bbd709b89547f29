"""The rules of the grammar audit (``tool="audit"``), registered once, with the sentence per category.

Severities: ``smuggler``, ``boundary-token``, ``whitespace-only-state`` and
``eos-only-state`` are facts about the tokenizer and the grammar (maskc's masks are right
about them), so ``info``; ``noncanonical-forced`` skews what the model sees, ``warning``;
``unspellable-state`` is a state a model under the mask reaches and then has no token to
write, ``error``.
"""

from __future__ import annotations

from maskc.compiler.findings import RuleInfo, register

__all__ = ["RULES", "WHY"]

WHY: dict[str, str] = {
    "smuggler": (
        "An engine that checks only a token's first byte admits these tokens and lets them carry a "
        "comma, a brace or too many characters past the grammar; maskc walks every byte and rejects them."),
    "boundary-token": (
        "These tokens are correct, but one token ends a value and writes the next piece of structure "
        "(a closing quote and a comma): an engine that masks per character or per lexeme must handle them."),
    "whitespace-only-state": (
        "Only whitespace is allowed here: the model spends tokens on layout, and an engine that lets "
        "whitespace repeat can let it loop until max_tokens."),
    "noncanonical-forced": (
        "A jump-forward engine inserts the forced string as the tokenizer encodes it, while the model "
        "under the mask would write it another way: the next-token distribution sees a tokenization "
        "it was not trained on."),
    "eos-only-state": (
        "The output is complete and EOS is the only token allowed: a sampler that drops EOS (min_tokens, "
        "ignore_eos) has nothing left to sample here."),
    "unspellable-state": (
        "Whole tokens reach this state, the grammar continues, and no token of the tokenizer can write "
        "what comes next: the mask is empty and decoding stalls."),
}

RULES: list[RuleInfo] = [
    RuleInfo("smuggler", "info", "tokens a first-byte mask admits that break the grammar", WHY["smuggler"],
             'after \'{"a":"x\' (last property), the token \'",\' begins with an allowed \'"\' and then breaks',
             "nothing to fix in the schema; make sure the serving engine checks every byte of a token",
             tool="audit"),
    RuleInfo("boundary-token", "info", "allowed tokens that write structure together with other bytes",
             WHY["boundary-token"], "after '{\"a\":\"x', the token '\"}' closes the string and the object",
             "nothing to fix; test the engine on outputs where these tokens occur", tool="audit"),
    RuleInfo("whitespace-only-state", "info", "states where only whitespace tokens are allowed",
             WHY["whitespace-only-state"], "--whitespace pretty: after '{' only '\\n  ' may follow",
             "use --whitespace compact unless the layout is needed", tool="audit"),
    RuleInfo("noncanonical-forced", "warning",
             "forced strings whose canonical tokenization differs from the greedy path of allowed tokens",
             WHY["noncanonical-forced"], "forced '\"location\":\"' encoded as '{\"' 'location' '\":\"'",
             "disable jump-forward for these states, or insert the canonical tokens and re-tokenize "
             "at the boundary", tool="audit"),
    RuleInfo("eos-only-state", "info", "states where EOS is the only allowed token", WHY["eos-only-state"],
             "after the closing '}' of the root object", "keep EOS allowed in the sampler where the grammar ends",
             tool="audit"),
    RuleInfo("unspellable-state", "error", "token-reachable states where bytes continue but no token does",
             WHY["unspellable-state"], "a string that allows 'é' for a vocabulary without it or its bytes",
             "use the model's own tokenizer, or restrict the grammar to what its tokens can spell",
             tool="audit"),
]

register(*RULES)
