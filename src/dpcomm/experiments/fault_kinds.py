"""The names of the release audit's seeded faults, without the audit.

The command line's parser lists them as ``--fault`` choices and imports no numpy.
"""

#: The seeded faults of the release `dpcomm.experiments.release_audit.seeded_release_fault`
#: builds (``--fault`` of ``dpcomm audit release``).
RELEASE_FAULT_KINDS: tuple[str, ...] = (
    "old-sensitivity",
    "centred-own-row",
    "quantile-own-row",
    "quantile-add-remove",
    "quantile-uncharged",
)
