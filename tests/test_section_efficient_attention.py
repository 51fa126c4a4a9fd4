"""The plumbing of 12.5's studies (labsupport.sections.efficient_attention.study)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from labsupport.sections.efficient_attention import study  # noqa: E402


def test_op_traffic_counts_what_each_operator_reads_and_writes():
    L, d = 40, 8
    q, k, v = (torch.randn(L, d) for _ in range(3))
    with study.OpTraffic() as count:
        (q @ k.T / d ** 0.5).softmax(-1) @ v
    # product: reads Q, K, writes S; scaling and softmax: read and write L^2 each;
    # product: reads P, V, writes O
    assert count.numbers == 6 * L * L + 4 * L * d
    with study.OpTraffic() as count:
        q.T, q.view(-1), q[:3]                               # views move nothing
    assert count.numbers == 0


def _rows(times):
    return [{"kernel": name, "length": n, "time_min": t, "status": "ok"}
            for name, series in times.items() for n, t in series.items()]


def test_faster_from_is_the_length_from_which_every_longer_one_wins():
    rows = _rows({"sdpa": {1: 1.0, 2: 2.0, 4: 4.0, 8: 8.0},
                  "a": {1: 2.0, 2: 1.0, 4: 5.0, 8: 1.0},        # wins at 2, loses at 4, wins at 8
                  "b": {1: 0.5, 2: 0.5, 4: 0.5, 8: 0.5},
                  "c": {1: 3.0, 2: 3.0, 4: 5.0, 8: 9.0}})
    assert study.faster_from(rows, "a") == 8
    assert study.faster_from(rows, "b") == 1
    assert study.faster_from(rows, "c") is None
    rows.append({"kernel": "b", "length": 16, "time_min": None, "status": "skipped"})
    assert study.faster_from(rows, "b") == 1                     # a point that did not run is no loss


@pytest.mark.parametrize("current", [(0, 0), (2, 3), (5, 5)])
def test_the_tiles_are_drawn_in_the_loops_order(current):
    fig, ax = plt.subplots()
    study.draw_tiles(ax, 6, current=current, colours=("#aaaaaa", "#000000", "#ff0000"))
    tiles = [p for p in ax.patches if p.get_width() == 1 and p.get_height() == 1]
    done = sum(p.get_facecolor()[:3] == matplotlib.colors.to_rgb("#aaaaaa") for p in tiles)
    assert len(tiles) == 36 and done == current[0] * 6 + current[1]
    plt.close(fig)
