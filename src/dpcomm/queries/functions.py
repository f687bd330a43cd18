"""The functions analyst SQL may call: DuckDB's deterministic scalar functions, by category.

A row projection and a post-processing run on the nodes of a deployment; every function they
call is named here, and any other is refused in one line (`dpcomm.queries.analyst`):
functions that read files, the session or the clock, draw random values, probe the catalog,
write logs or sleep are never here, nor extension-specific ones. Names are DuckDB's (lower
case; sqlglot's spelling of a node is mapped to DuckDB's before the look-up). Aggregates are
checked apart, by the analyst rewrite. The list was derived from the functions the project's
SQL tests and DuckDB's own SQL logic tests (``tests/data/duckdb_sqllogictest``) call, plus the
categories below; ``docs/execution.md`` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Conditionals and casts.
CONDITIONALS = frozenset({
    "case", "if", "coalesce", "ifnull", "nullif", "greatest", "least", "cast",
    "try_cast", "typeof", "create_sort_key",
})  # fmt: skip

#: Arithmetic and math.
MATH = frozenset({
    "abs", "add", "subtract", "multiply", "divide", "fdiv", "fmod", "mod", "ceil",
    "ceiling", "floor", "round", "round_even", "roundbankers", "trunc", "even", "sign",
    "signbit", "sqrt", "cbrt", "exp", "ln", "log", "log2", "log10", "pow", "power", "pi",
    "degrees", "radians", "sin", "cos", "tan", "cot", "asin", "acos", "atan", "atan2",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "gamma", "lgamma", "factorial",
    "gcd", "lcm", "greatest_common_divisor", "least_common_multiple", "isnan", "isinf",
    "isfinite", "nextafter", "bit_count", "xor",
})  # fmt: skip

#: Text.
TEXT = frozenset({
    "length", "char_length", "character_length", "octet_length", "bit_length",
    "strlen", "lower", "upper", "lcase", "ucase", "concat", "concat_ws", "substring",
    "substr", "left", "right", "trim", "ltrim", "rtrim", "replace", "reverse", "repeat",
    "lpad", "rpad", "position", "strpos", "instr", "contains", "starts_with",
    "ends_with", "prefix", "suffix", "split_part", "string_split", "str_split",
    "string_to_array", "split", "regexp_matches", "regexp_full_match", "regexp_replace",
    "regexp_extract", "regexp_extract_all", "regexp_split_to_array", "regexp_escape",
    "like_escape", "ilike_escape", "not_like_escape", "not_ilike_escape", "ascii", "chr",
    "ord", "unicode", "translate", "strip_accents", "nfc_normalize", "format", "printf",
    "md5", "sha1", "sha256", "hash", "levenshtein", "damerau_levenshtein", "hamming",
    "mismatches", "jaccard", "jaro_similarity", "jaro_winkler_similarity", "hex",
    "to_hex", "unhex", "bin", "to_binary", "unbin", "to_base64", "base64",
    "from_base64", "array_to_string",
})  # fmt: skip

#: Dates and times.
DATES_AND_TIMES = frozenset({
    "date_trunc", "datetrunc", "date_part", "datepart", "extract", "date_diff",
    "datediff", "date_sub", "datesub", "date_add", "year", "month", "day", "dayofmonth",
    "hour", "minute", "second", "millisecond", "microsecond", "nanosecond", "quarter",
    "week", "weekofyear", "weekday", "dayofweek", "dayofyear", "isodow", "isoyear",
    "yearweek", "decade", "century", "millennium", "era", "julian", "dayname",
    "monthname", "last_day", "epoch", "epoch_ms", "epoch_us", "epoch_ns", "make_date",
    "make_time", "make_timestamp", "make_timestamp_ms", "make_timestamp_ns", "strftime",
    "strptime", "try_strptime", "time_bucket", "to_timestamp", "to_years", "to_months",
    "to_weeks", "to_days", "to_hours", "to_minutes", "to_seconds", "to_milliseconds",
    "to_microseconds", "interval",
})  # fmt: skip

#: Lists and structs.
LISTS_AND_STRUCTS = frozenset({
    "array", "list_value", "array_value", "range", "generate_series", "len",
    "array_length", "cardinality", "list_transform", "list_apply", "array_transform",
    "array_apply", "apply", "list_filter", "array_filter", "filter", "list_reduce",
    "array_reduce", "reduce", "list_sum", "list_avg", "list_min", "list_max",
    "list_count", "list_contains", "list_has", "array_contains", "array_has",
    "list_extract", "list_element", "array_extract", "list_slice", "array_slice",
    "list_sort", "array_sort", "list_reverse_sort", "list_distinct", "array_distinct",
    "list_unique", "list_concat", "list_cat", "array_concat", "array_cat",
    "list_position", "list_indexof", "list_resize", "array_resize", "flatten",
    "list_zip", "struct", "struct_pack", "row", "struct_extract",
})  # fmt: skip

#: JSON text.
JSON_TEXT = frozenset({
    "json_extract", "json_extract_string", "json_value", "json_exists",
    "json_array_length", "json_valid", "json_type", "json_keys",
})  # fmt: skip

#: Each category of allowed functions and its DuckDB names.
ALLOWED_BY_CATEGORY: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "conditionals and casts": CONDITIONALS,
        "arithmetic and math": MATH,
        "text": TEXT,
        "dates and times": DATES_AND_TIMES,
        "lists and structs": LISTS_AND_STRUCTS,
        "JSON text": JSON_TEXT,
    }
)

#: Every function analyst SQL may call (besides the aggregates the rewrite accepts).
ALLOWED_FUNCTIONS: frozenset[str] = frozenset().union(*ALLOWED_BY_CATEGORY.values())

__all__ = [
    "ALLOWED_BY_CATEGORY",
    "ALLOWED_FUNCTIONS",
    "CONDITIONALS",
    "DATES_AND_TIMES",
    "JSON_TEXT",
    "LISTS_AND_STRUCTS",
    "MATH",
    "TEXT",
]
