"""Loading a server's modules without the cyclic garbage collector.

Importing the app creates about 200,000 objects, and the collector runs over all of them again and
again while they are made (on this project's servers about a sixth of a second of CPU per start, a
sixth of the import). Almost none is garbage: the modules, classes and schemas live as long as the
process. So `paywarden serve` turns the collector off before it loads anything (`collect_later`), and
the app's factory, once everything is loaded, freezes it (moves it out of the collector's
generations, as Python's documentation advises for long-lived objects made at start) and turns the
collector back on (`loaded`): later collections no longer scan it either. A worker started for
`--workers` loads with the collector on, and freezes what it loaded too. The little
garbage the imports leave (about two thousand objects) is kept, which is cheaper than the full
collection that would find it.
"""

from __future__ import annotations

import gc


def collect_later() -> None:
    """Turn the cyclic collector off until `loaded()`."""
    gc.disable()


def loaded() -> None:
    """Everything a server needs is loaded: freeze it and collect from now on."""
    gc.freeze()
    gc.enable()
