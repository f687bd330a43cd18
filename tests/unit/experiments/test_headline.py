"""The headline table (the README's): dummies needed for ε ≤ 1 in the paper's scenario."""

from dpcomm.accounting import ScramblerMechanism
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.experiments.headline import headline_markdown, headline_rows
from dpcomm.plan import balanced_batch_sizes, batch_size_counts


def test_headline_known_values():
    rows = {row.method: row for row in headline_rows(monte_carlo_samples=1000)}
    assert rows["exact"].num_dummies == 275
    assert rows["bennett"].num_dummies == 546
    assert rows["hoeffding"].num_dummies == 4334
    assert rows["post-processing"].num_dummies is None
    assert rows["monte-carlo"].status == "estimate"
    exact = rows["exact"]
    assert exact.num_scramblers == 124
    assert exact.num_sources == 12_346
    assert batch_size_counts(12_346, 100) == {100: 70, 99: 54}
    assert exact.batch_sizes == balanced_batch_sizes(12_346, 100)
    # Sources → scramblers (S_t), scramblers → compute nodes (S_t + SC·d), compute → result (C).
    assert exact.messages == 2 * 12_346 + 124 * 275 + 20
    assert exact.nonprivate_messages == 10_020
    # d = 275 is the least that reaches δ at ε = 1 for every batch size (100 and 99).
    for batch in (100, 99):
        for dummies, reached in ((275, True), (274, False)):
            mechanism = ScramblerMechanism(
                num_targets=20, sampling_rate=0.2, batch_size=batch, num_dummies=dummies
            )
            assert (ExactLemma2(mechanism).delta(1.0) <= 1e-4) == reached
    table = headline_markdown(tuple(rows.values()))
    assert table.count("\n|") == 7  # header, separator and 5 rows
    assert "estimate" in table and "unreachable" in table
