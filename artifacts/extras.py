"""Optional dependencies: compiling needs none; decoding with a model needs the torch extra.

``pip install maskc`` is enough to compile, inspect and trace a given output. ``maskc check``,
``maskc trace --model`` / ``--logits``, the torch bitmask helpers and the transformers
``LogitsProcessor`` need torch (and transformers): :func:`require_torch` turns their absence
into a typed error that names the extra to install, instead of a ``ModuleNotFoundError``
from deep inside an import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from maskc.compiler.errors import InputError

__all__ = ["TORCH_EXTRA_HINT", "missing_modules", "require_torch"]

TORCH_EXTRA_HINT = "install the torch extra: pip install 'maskc[torch]' (in a clone: pip install -e '.[torch]')"


def missing_modules(names: Iterable[str]) -> list[str]:
    """The top-level modules of ``names`` that cannot be imported here."""
    absent = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder refused it, or a half-initialized module
            found = False
        if not found:
            absent.append(name)
    return absent


def require_torch(feature: str, *, transformers: bool = True) -> None:
    """Raise :class:`InputError` (with the install hint) if ``feature``'s modules are absent.

    Args:
        feature: What the user asked for, as they would name it (``"maskc check"``).
        transformers: Whether ``feature`` also needs transformers (a model), not only torch.
    """
    absent = missing_modules(("torch", "transformers") if transformers else ("torch",))
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        raise InputError(f"{feature} needs {' and '.join(absent)}, which {verb} not installed",
                         hint=TORCH_EXTRA_HINT)
