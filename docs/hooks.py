"""mkdocs hook: accept the codebase's grouped argument entries in Google docstrings.

The docstrings document arguments that share a meaning together, on one entry:
`lower, upper: (3,) corners of the box, m`. griffe's Google parser reads the group as one
parameter named "lower, upper" (rendered as such, which reads well) and warns that no
parameter has that name; in strict mode every warning fails the build. This hook drops
exactly those warnings (a name containing ", " or " or "), so that a documented parameter
that really is missing from a signature (a stale or misspelt name) still fails the build.
"""

import logging
import re

_GROUP = re.compile(r"Parameter '[^']*(, | or )[^']*' does not appear in the function signature")


class _GroupedParameters(logging.Filter):
    def filter(self, record):
        return not _GROUP.search(record.getMessage())


_FILTER = _GroupedParameters()


def on_config(config):
    logger = logging.getLogger("mkdocs.plugins.griffe")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return config
