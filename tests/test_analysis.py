"""Item analysis (grader.classroom.analysis) on hand-made rows, and the class report written from it."""
from __future__ import annotations

import csv
import json
import math
import multiprocessing
import os
import sys

import pytest

from grader.classroom import class_report
from grader.classroom.analysis import SMALL_CLASS, StudentRow, analyse, flag, mistake_messages


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
        """JSON, both CSVs, two PNG plots and one page that inlines them and escapes titles."""
        written = class_report.write(small_analysis(), {"a": "A <first> item", "b": "B"}, tmp_path)
        assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [
            "item_analysis.csv", "item_analysis.json", "misconceptions.csv", "plots/misconceptions.png",
            "plots/score_histogram.png", "report.html"]
        with (tmp_path / "item_analysis.csv").open(newline="") as handle:
            first = next(csv.DictReader(handle))
        assert first == {"item": "a", "title": "A <first> item", "max_score": "1", "mean_fraction": "0.500",
                         "discrimination": "1.000", "item_rest_correlation": "0.894", "full_marks": "2", "zero": "2",
                         "distribution": "0:2 1:2", "flag": ""}
        assert (tmp_path / "misconceptions.csv").read_text() == "item,mistake,students,message\na,off-by-one,2,\n"
        assert json.loads((tmp_path / "item_analysis.json").read_text())["items"][0]["discrimination"] == 1.0
        assert all((tmp_path / "plots" / n).read_bytes()[:4] == b"\x89PNG" for n in class_report.PLOTS)
        page = (tmp_path / "report.html").read_text()
        assert "A &lt;first&gt; item" in page and "A <first>" not in page
        assert page.count('src="data:image/png;base64,') == 2

    def test_without_matplotlib_everything_but_the_plots(self, tmp_path, monkeypatch):
        """If matplotlib cannot be imported, the tables and the page are still written, without images."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
        written = class_report.write(small_analysis(), {}, tmp_path)
        assert [p.name for p in written] == ["item_analysis.json", "item_analysis.csv", "misconceptions.csv",
                                             "report.html"]
        assert "<img" not in (tmp_path / "report.html").read_text()
        assert not (tmp_path / "plots").exists()

    @pytest.mark.parametrize("mistakes", [True, False])
    def test_misconception_plot_with_and_without_mistakes(self, tmp_path, mistakes):
        """The misconception plot is drawn even when nobody made a named mistake."""
        analysis = small_analysis() if mistakes else analyse(rows_of({"a": [1, 0, 1]}), {"a": 1})
        class_report.plot(analysis, {}, tmp_path)
        assert (tmp_path / "misconceptions.png").stat().st_size > 1000


def gone(pid: int) -> bool:
    """No process `pid`, not even a zombie: it exited and was waited for."""
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.skipif(sys.platform != "linux", reason="the plotting process is forked (Linux only)")
class TestPlotter:
    def test_draws_both_plots_in_its_process_and_is_joined(self, tmp_path, monkeypatch):
        """draw() returns the two PNGs, as plot() draws them, from the forked process (plot() here
        is broken after the fork); the process is waited for."""
        pytest.importorskip("matplotlib")
        plotter = class_report.Plotter()
        pid = plotter._proc.pid

        def broken(*args):
            raise AssertionError("drawn in the test process, not by the plotting process")

        real_plot = class_report.plot
        monkeypatch.setattr(class_report, "plot", broken)
        written = plotter.draw(small_analysis(), {"a": "A"}, tmp_path / "plots")
        assert written == [tmp_path / "plots" / name for name in class_report.PLOTS]
        assert all(p.read_bytes()[:4] == b"\x89PNG" and p.stat().st_size > 1000 for p in written)
        assert real_plot(small_analysis(), {"a": "A"}, tmp_path / "here") == [tmp_path / "here" / n
                                                                             for n in class_report.PLOTS]
        assert [p.read_bytes() for p in written] == [(tmp_path / "here" / n).read_bytes() for n in class_report.PLOTS]
        assert multiprocessing.active_children() == [] and gone(pid)

    def test_a_dead_plotting_process_is_replaced_by_drawing_here(self, tmp_path):
        """If the plotting process was killed, draw() still returns both plots, drawn in this process."""
        pytest.importorskip("matplotlib")
        plotter = class_report.Plotter()
        plotter._proc.kill()
        plotter._proc.join()
        written = plotter.draw(small_analysis(), {}, tmp_path)
        assert [p.name for p in written] == list(class_report.PLOTS)
        assert all(p.stat().st_size > 1000 for p in written)
        assert multiprocessing.active_children() == []

    def test_close_without_drawing_stops_the_process(self):
        """A plotter closed unused (grading failed) stops its process; closing again does nothing."""
        plotter = class_report.Plotter()
        pid = plotter._proc.pid
        plotter.close()
        plotter.close()
        assert multiprocessing.active_children() == [] and gone(pid)

    def test_write_with_a_plotter_gives_the_same_report(self, tmp_path):
        """class_report.write with a plotter writes the same files, and report.html with both PNGs
        inlined is byte-identical to the one written without."""
        pytest.importorskip("matplotlib")
        titles = {"a": "A <first> item", "b": "B"}
        alone = class_report.write(small_analysis(), titles, tmp_path / "alone")
        helped = class_report.write(small_analysis(), titles, tmp_path / "helped", class_report.Plotter())
        assert [p.relative_to(tmp_path / "helped") for p in helped] == [p.relative_to(tmp_path / "alone") for p in alone]
        page = (tmp_path / "helped" / "report.html").read_text()
        assert page.count('src="data:image/png;base64,') == 2
        assert page == (tmp_path / "alone" / "report.html").read_text()
        assert multiprocessing.active_children() == []

    def test_without_matplotlib_the_plotter_draws_nothing(self, tmp_path, monkeypatch):
        """If the plotting process cannot import matplotlib, write() gives the page without images."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # inherited by the forked process
        written = class_report.write(small_analysis(), {}, tmp_path, class_report.Plotter())
        assert [p.name for p in written] == ["item_analysis.json", "item_analysis.csv", "misconceptions.csv",
                                             "report.html"]
        assert "<img" not in (tmp_path / "report.html").read_text()
        assert multiprocessing.active_children() == []


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
