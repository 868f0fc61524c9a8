"""Item analysis (grader.classroom.analysis) on hand-made rows, and the class report written from it."""
from __future__ import annotations

import csv
import json
import math
import sys
from xml.etree import ElementTree

import pytest

from grader.classroom import class_report, plots
from grader.classroom.analysis import SMALL_CLASS, Analysis, StudentRow, analyse, flag, mistake_messages


def rows_of(scores: dict[str, list[float]], mistakes: dict[int, dict[str, tuple[str, ...]]] | None = None):
    """Students s0, s1, ... with the given scores per item (and mistakes by student index)."""
    count = len(next(iter(scores.values())))
    return [StudentRow(f"s{k}", {item: values[k] for item, values in scores.items()}, (mistakes or {}).get(k, {}))
            for k in range(count)]


class TestAnalyse:
    def test_discrimination_is_one_when_the_top_group_passes_and_the_bottom_fails(self):
        """Ten students, groups of round(0.27 * 10) = 3: top three all pass, bottom three all fail: D = 1."""
        rows = rows_of({"item": [0, 0, 0, 1, 0, 1, 0, 1, 1, 1], "rest": list(range(10))})
        stats = analyse(rows, {"item": 1, "rest": 9}).items[0]
        assert stats.discrimination == 1.0

    def test_discrimination_is_minus_one_when_reversed(self):
        """An item only the weakest students get right has D = -1."""
        rows = rows_of({"item": [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], "rest": [0, 0, 0, 3, 4, 5, 6, 7, 8, 9]})
        assert analyse(rows, {"item": 1, "rest": 9}).items[0].discrimination == -1.0

    def test_discrimination_uses_fractions_of_the_points(self):
        """Half the points in the top group and none in the bottom group is D = 0.5."""
        rows = rows_of({"item": [0, 0, 5, 5], "rest": [0, 1, 2, 3]})
        assert analyse(rows, {"item": 10, "rest": 3}).items[0].discrimination == 0.5

    def test_item_rest_correlation(self):
        """The item against the total of the other items: r = 2 / sqrt(5) for these scores."""
        rows = rows_of({"a": [0, 0, 1, 1], "b": [1, 2, 3, 4]})
        stats = analyse(rows, {"a": 1, "b": 4}).items
        assert stats[0].item_rest == round(2 / math.sqrt(5), 4) == 0.8944
        assert stats[1].item_rest == 0.8944  # symmetric with two items

    def test_item_rest_is_none_without_variation_or_with_too_few_students(self):
        """A constant item, or fewer than three students, has no correlation (not 0, not nan)."""
        constant = analyse(rows_of({"a": [1, 1, 1], "b": [0, 1, 2]}), {"a": 1, "b": 2}).items[0]
        two = analyse(rows_of({"a": [0, 1], "b": [0, 1]}), {"a": 1, "b": 1}).items[0]
        assert (constant.item_rest, two.item_rest) == (None, None)
        assert two.discrimination == 1.0  # one student in each group

    def test_mean_distribution_full_marks_and_zero(self):
        """Mean fraction, (points, students) ascending, and the full-marks and zero counts."""
        stats = analyse(rows_of({"a": [10, 10, 5, 0]}), {"a": 10}).items[0]
        assert (stats.mean, stats.distribution, stats.full_marks, stats.zero) == (0.625, ((0, 1), (5, 1), (10, 2)), 2, 1)

    def test_totals_and_missing_scores(self):
        """A missing item score counts as 0; totals and their mean follow."""
        rows = [StudentRow("a", {"x": 2, "y": 3}), StudentRow("b", {"x": 1})]
        analysis = analyse(rows, {"x": 2, "y": 3})
        assert (analysis.students, analysis.totals, analysis.mean_total, analysis.max_total) == (2, (5, 1), 3.0, 5)
        assert analysis.items[1].distribution == ((0, 1), (3, 1))

    def test_each_student_counts_once_per_mistake(self):
        """Mistakes count students, in item order, then most frequent first, then by id."""
        mistakes = {0: {"b": ("m1", "m1"), "a": ("z",)}, 1: {"b": ("m2",)}, 2: {"b": ("m2",)}, 3: {"c": ("q",)}}
        analysis = analyse(rows_of({"a": [0, 0, 0, 0], "b": [0, 0, 0, 0]}, mistakes), {"a": 1, "b": 1})
        assert analysis.mistakes == (("a", "z", 1), ("b", "m2", 2), ("b", "m1", 1), ("c", "q", 1))

    def test_no_students(self):
        """An empty class gives zeros and no indices, never a division by zero."""
        analysis = analyse([], {"a": 1})
        assert (analysis.students, analysis.mean_total, analysis.items[0].mean) == (0, 0.0, 0.0)
        assert (analysis.items[0].discrimination, analysis.items[0].item_rest) == (None, None)


def small_analysis():
    rows = rows_of({"a": [0, 0, 1, 1], "b": [1, 2, 3, 4]}, {0: {"a": ("off-by-one",)}, 1: {"a": ("off-by-one",)}})
    return analyse(rows, {"a": 1, "b": 4})


class TestClassReport:
    def test_tables_plots_and_page(self, tmp_path):
        """JSON, both CSVs, two SVG plots and one page that holds them inline and escapes titles."""
        written = class_report.write(small_analysis(), {"a": "A <first> item", "b": "B"}, tmp_path)
        assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [
            "item_analysis.csv", "item_analysis.json", "misconceptions.csv", "plots/misconceptions.svg",
            "plots/score_histogram.svg", "report.html"]
        with (tmp_path / "item_analysis.csv").open(newline="") as handle:
            first = next(csv.DictReader(handle))
        assert first == {"item": "a", "title": "A <first> item", "max_score": "1", "mean_fraction": "0.500",
                         "discrimination": "1.000", "item_rest_correlation": "0.894", "full_marks": "2", "zero": "2",
                         "distribution": "0:2 1:2", "flag": ""}
        assert (tmp_path / "misconceptions.csv").read_text() == "item,mistake,students,message\na,off-by-one,2,\n"
        assert json.loads((tmp_path / "item_analysis.json").read_text())["items"][0]["discrimination"] == 1.0
        svgs = [(tmp_path / "plots" / n).read_text() for n in plots.PLOTS]
        assert [ElementTree.fromstring(svg).tag for svg in svgs] == [f"{SVG}svg"] * 2
        page = (tmp_path / "report.html").read_text()
        assert "A &lt;first&gt; item" in page and "A <first>" not in page
        assert all(svg in page for svg in svgs) and page.count("<svg ") == 2 and "<img" not in page

    def test_the_plots_need_no_plotting_library(self, tmp_path, monkeypatch):
        """With matplotlib (or PIL) impossible to import, both plots are still drawn."""
        for name in ("matplotlib", "PIL"):
            monkeypatch.setitem(sys.modules, name, None)  # makes `import matplotlib` raise ImportError
        written = class_report.write(small_analysis(), {}, tmp_path)
        assert [p.relative_to(tmp_path).as_posix() for p in written if p.parent.name == "plots"] == \
            ["plots/score_histogram.svg", "plots/misconceptions.svg"]

    def test_an_earlier_versions_png_plots_are_removed(self, tmp_path):
        """Written again into a folder where an earlier version drew PNG plots, plots/ holds only
        what report.html shows."""
        (tmp_path / "plots").mkdir()
        for name in ("score_histogram.png", "misconceptions.png", "mine.png"):
            (tmp_path / "plots" / name).write_bytes(b"\x89PNG")
        class_report.write(small_analysis(), {}, tmp_path)
        assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["mine.png", *sorted(plots.PLOTS)]


SVG = "{http://www.w3.org/2000/svg}"


def bars(svg: str) -> list[tuple[float, float, float, float, str, str]]:
    """Every rectangle with a tooltip (a bar): x, y, width, height, fill, tooltip."""
    root = ElementTree.fromstring(svg)
    return [(float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")), r.get("fill"),
             r.find(f"{SVG}title").text) for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]


def texts(svg: str) -> list[str]:
    return [t.text for t in ElementTree.fromstring(svg).iter(f"{SVG}text")]


class TestHistogram:
    def test_a_bar_per_occupied_bin_as_high_as_its_count(self):
        """Nine students in 5 bins of 0-10 (numpy's histogram): a bar for each bin with students,
        its height in proportion to its count, its tooltip naming its range and count."""
        totals = (0, 1, 1, 3, 4.5, 9, 9, 10, 10)
        drawn = bars(plots.histogram(Analysis(9, 10.0, 5.28, totals, (), ())))
        assert [b[5] for b in drawn] == ["0 to 2 points: 3 students", "2 to 4 points: 1 student",
                                         "4 to 6 points: 1 student", "8 to 10 points: 4 students"]
        unit = drawn[1][3]
        assert unit > 0 and [round(b[3] / unit, 6) for b in drawn] == [3, 1, 1, 4]
        assert len({round(b[1] + b[3], 6) for b in drawn}) == 1  # one baseline
        assert [round(b[2], 6) for b in drawn] == [round(drawn[0][2], 6)] * 4  # equal widths
        assert drawn[3][0] > drawn[2][0] + 2 * drawn[2][2] - 1  # bin 6-8 is empty: a gap
        words = texts(plots.histogram(Analysis(9, 10.0, 5.28, totals, (), ())))
        assert words[0] == "Score distribution (9 students, mean 5.3)" and "total score (of 10)" in words

    def test_one_student_and_no_student(self):
        """A class of one reads "1 student"; a class of none draws axes and no bar."""
        assert "Score distribution (1 student, mean 4.0)" in texts(plots.histogram(Analysis(1, 10.0, 4.0, (4,), (), ())))
        assert bars(plots.histogram(Analysis(0, 10.0, 0.0, (), (), ()))) == []

    def test_the_same_analysis_gives_the_same_bytes(self):
        """Drawn twice, or from an equal analysis, a plot is the same text (merged slices compare byte for byte)."""
        assert plots.histogram(small_analysis()) == plots.histogram(small_analysis())
        assert plots.misconceptions(small_analysis()) == plots.misconceptions(small_analysis())


class TestMisconceptions:
    def test_a_bar_per_mistake_in_order_coloured_by_problem(self):
        """One bar per named mistake, top to bottom in the analysis's order, as long as its count,
        one colour per problem, the count written at its end."""
        mistakes = (("softmax", "wrong-axis", 4), ("softmax", "no-shift", 1), ("split", "no-transpose", 2))
        svg = plots.misconceptions(Analysis(5, 10.0, 5.0, (1, 2, 3, 4, 5), (), mistakes))
        drawn = bars(svg)
        assert [b[5] for b in drawn] == ["softmax: wrong-axis: 4 students", "softmax: no-shift: 1 student",
                                         "split: no-transpose: 2 students"]
        assert [b[1] for b in drawn] == sorted(b[1] for b in drawn)  # top to bottom
        assert [round(b[2] / drawn[1][2], 6) for b in drawn] == [4, 1, 2]
        assert [b[4] for b in drawn] == [plots.PALETTE[0], plots.PALETTE[0], plots.PALETTE[1]]
        assert {"softmax: wrong-axis", "4", "1", "2", "students who made the mistake"} <= set(texts(svg))

    def test_no_mistakes_says_so(self):
        svg = plots.misconceptions(Analysis(3, 1.0, 1.0, (1, 1, 1), (), ()))
        assert bars(svg) == [] and "no named mistakes" in texts(svg)

    def test_a_long_label_is_cut_beside_its_bar_and_whole_in_its_tooltip(self):
        """A label longer than plots.LABEL characters ends in an ellipsis beside its bar, and the
        plot widens for it no further; its tooltip names it whole."""
        mistake = "a-very-long-mistake-name-" * 6
        svg = plots.misconceptions(Analysis(1, 1.0, 1.0, (1,), (), (("softmax", mistake, 1),)))
        shown = [t for t in texts(svg) if t.startswith("softmax: ")]
        assert shown == [f"softmax: {mistake}"[:plots.LABEL - 1] + "\u2026"]
        assert bars(svg)[0][5] == f"softmax: {mistake}: 1 student"
        assert float(ElementTree.fromstring(svg).get("width")) <= 7 * plots.LABEL + 16 + 360 + 40

    def test_a_label_is_text_whatever_it_holds(self):
        """Markup and control characters in an item or mistake name stay text: the SVG parses,
        and the label reads as written, less the control characters."""
        mistakes = (('p<1> & "q"', "</text><script>x</script>\x07", 1),)
        svg = plots.misconceptions(Analysis(1, 1.0, 1.0, (1,), (), mistakes))
        assert 'p<1> & "q": </text><script>x</script>' in texts(svg)
        assert "<script" not in svg


@pytest.mark.parametrize("top, integer, expected", [
    (10, True, [0, 2, 4, 6, 8, 10]), (166, False, [0, 50, 100, 150, 200]), (1, True, [0, 1]),
    (3, True, [0, 1, 2, 3]), (7, True, [0, 2, 4, 6, 8]), (1, False, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (0, True, [0, 1])])
def test_ticks(top, integer, expected):
    """Round steps from 0 to at least the top; whole numbers on a count's axis."""
    assert plots.ticks(top, integer=integer) == expected


class TestReportAtAGlance:
    """report.html for an instructor: statuses, mistake messages, a caveat on small classes, item flags."""

    STATUSES = ("graded", "syntax error", "import failure", "timeout", "empty", "error")

    def rows(self):
        scores = {"a": [1, 1, 1, 1, 0, 0], "b": [1, 0, 1, 0, 0, 0], "c": [1, 1, 1, 1, 1, 1]}
        return [StudentRow(f"s{k}", {i: v[k] for i, v in scores.items()}, {"b": ("b-axis",)} if k == 1 else {},
                           status=self.STATUSES[k]) for k in range(6)]

    def test_flag_items_everybody_or_nobody_got(self):
        """An item all students got full marks on, or none scored on, is flagged; others are not."""
        analysis = analyse([StudentRow(f"s{k}", {"all": 1, "none": 0, "some": k % 2}) for k in range(4)],
                           {"all": 1, "none": 1, "some": 1})
        assert [flag(i, analysis.students) for i in analysis.items] == ["everybody full marks", "nobody scored", ""]

    def test_page_has_statuses_messages_caveat_and_flags(self, tmp_path):
        rows = self.rows()
        analysis = analyse([r for r in rows if r.status != "error"], {"a": 1, "b": 1, "c": 1})
        class_report.write(analysis, {"a": "A", "b": "B", "c": "C"}, tmp_path, students=rows,
                           messages={("b", "b-axis"): "You reduced over the <wrong> axis."})
        page = (tmp_path / "report.html").read_text()
        assert "6 students: 1 graded, 1 syntax error, 1 import failure, 1 timeout, 1 empty, 1 error. 5 analysed" in page
        for k, status in enumerate(self.STATUSES[1:], start=1):
            assert f'<td><code>s{k}</code></td><td><span class="bad">{status}</span></td>' in page
        assert "You reduced over the &lt;wrong&gt; axis." in page  # the message, escaped, beside the id
        assert "Only 5 students were analysed." in page
        assert "<tr class=flag><td><code>c</code></td>" in page and "everybody full marks" in page
        assert "1 item(s) are flagged" in page
        rows_csv = list(csv.DictReader((tmp_path / "misconceptions.csv").open()))
        assert rows_csv == [{"item": "b", "mistake": "b-axis", "students": "1",
                             "message": "You reduced over the <wrong> axis."}]

    def test_no_caveat_from_thirty_students(self, tmp_path):
        rows = [StudentRow(f"s{k}", {"a": k % 2, "b": k % 3 // 2}) for k in range(SMALL_CLASS)]
        page = class_report.render_html(analyse(rows, {"a": 1, "b": 1}), {}, [], rows)
        assert "were analysed" not in page and f"{SMALL_CLASS} students: {SMALL_CLASS} graded." in page

    def test_mistake_messages_of_the_course(self, course):
        """Every problem mistake and every quiz misconception has its message, keyed by (item, mistake)."""
        messages = mistake_messages(course)
        for problem in course.problems:
            for mistake in problem.mistakes:
                assert messages[(problem.id, mistake.id)] == mistake.message
        pruning = course.quiz.item("pruning")
        wrong = next(c for c in pruning.choices if c.mistake and not c.correct)
        assert messages[("pruning", wrong.mistake)] == wrong.feedback
