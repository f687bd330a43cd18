"""Values as JSON can hold them: what every record's ``to_dict()`` returns its values through.

Records (a run's report, an accountant's answer, ...) keep their values as they are, ε = ∞ a
float; `json_ready` is the one place where a value becomes JSON, so that every document
dpcomm prints spells infinity, NaN, DECIMAL values and dates the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

#: How JSON documents spell the floats JSON has no literal for.
POSITIVE_INFINITY = "inf"
NEGATIVE_INFINITY = "-" + POSITIVE_INFINITY
NOT_A_NUMBER = "NaN"


def json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it.

    Arrays become lists (and numpy scalars Python numbers); NaN and ±∞ the strings "NaN",
    "inf" and "-inf" (null is None, SQL NULL); DECIMAL values, dates and times their exact
    text; mappings get text keys.

    Examples:
        >>> import math
        >>> from decimal import Decimal
        >>> json_ready({"epsilon": math.inf, "values": (1.5, math.nan, None, Decimal("12.30"))})
        {'epsilon': 'inf', 'values': [1.5, 'NaN', None, '12.30']}
    """
    if isinstance(value, float):
        if math.isnan(value):
            return NOT_A_NUMBER
        if math.isinf(value):
            return POSITIVE_INFINITY if value > 0 else NEGATIVE_INFINITY
        return value
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, Decimal):
        return format(value, "f")
    if type(value).__module__.split(".")[0] == "numpy":  # arrays and scalars, without numpy
        return json_ready(value.tolist())
    return str(value)
