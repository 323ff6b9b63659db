"""Unicode folding shared by the answer metrics and the page readers, so both match text alike.

A question typed in ASCII ("cafe zurich") must find and score the page or answer that writes
"Café Zürich"; the search index folds the same way with tantivy's ASCII-folding filter.
"""

from __future__ import annotations

import unicodedata


def fold_unicode(text: str) -> str:
    """Compatibility-decompose and drop combining marks: ``é`` -> ``e``, ``ﬁ`` -> ``fi``, ``１`` -> ``1``.

    >>> fold_unicode("Café Zürich")
    'Cafe Zurich'
    """
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch)))
