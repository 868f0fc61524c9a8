"""Problem files: good ones load; each kind of bad one gives its exact `path:line: message`."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grader.course.loader import load_course, load_problem
from grader.course.model import CompareKind, Visibility
from grader.course.yamlio import load_yaml
from grader.errors import SpecErrors

from .conftest import COURSE_CODE, EXERCISES, copy_course_code

GOOD = """\
id: attention_reading
title: Reading
points: 10
prompt: Read the values.
compare: {rtol: 1e-6, atol: 1.0e-9}
cases:
  - name: worked example
    visibility: public
    args:
      weights: [0.8, 0.2]
      values: [[1, 0, 10, 0], [0, 1, 0, 20]]
    expect: [0.8, 0.2, 8, 4]
"""


def write(tmp_path: Path, text: str, name: str = "attention_reading.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_problem(path, COURSE_CODE)
    return [str(e) for e in info.value.errors]


class TestLoadProblem:
    def test_good_file_loads(self, tmp_path):
        """A valid file becomes a Problem; 1e-6 is read as a float, not text."""
        problem = load_problem(write(tmp_path, GOOD), COURSE_CODE)
        assert problem.function.name == "attention_reading"
        assert problem.compare.kind is CompareKind.ALLCLOSE
        assert problem.compare.rtol == 1e-6 and problem.compare.atol == 1e-9
        assert problem.cases[0].visibility is Visibility.PUBLIC and problem.cases[0].line == 7

    @pytest.mark.parametrize("old,new,message", [
        ("points: 10\n", "points: 10\ncolour: red\n",
         ":4: unknown key 'colour' in a problem (allowed: cases, compare, function, hints, id, mistakes, params, "
         "points, prompt, timeout, title)"),
        ("points: 10\n", "points: ten\n", ":3: 'points' must be a number (got 'ten')"),
        ("atol: 1.0e-9", "atol: small", ":5: 'atol' must be a number (got 'small')"),
        ("rtol: 1e-6", "rtol: -0.1", ":5: 'rtol' must be between 0 and 1 (got -0.1)"),
        ("title: Reading\n", "title: Reading\nfunction: attention_writing\n",
         ":3: unknown function 'attention_writing' (declared by the course: softmax, attention_reading, "
         "count_routing_distributions, scaled_dot_product_attention, split_heads, merge_heads, multi_head_attention, "
         "predict_shapes, parameter_count, previous_token_head, sink_head, multi_head_reading, head_contributions, "
         "two_head_layer, one_head_both_designs, padded_batch_attention, run_model, head_scores, ablation_deltas, thin_head, "
         "one_wide_head, from_torch_layout; "
         "or declare it with a 'function:' block of signature, params, returns)"),
        ("visibility: public", "visibility: secret", ":8: 'visibility' must be public or hidden (got 'secret')"),
        ("      weights: [0.8, 0.2]\n", "      weights: [0.8, 0.2]\n      keys: [1]\n",
         ":11: 'keys' is not a parameter of attention_reading(weights, values) -> ndarray"),
        ("      weights: [0.8, 0.2]\n", "      weights: [[0.8, 0.2], [0.1]]\n",
         ":10: argument 'weights': must be a rectangular nested list of numbers (got [[0.8, 0.2], [0.1]])"),
        ("      weights: [0.8, 0.2]\n", "      weights: {random: gaussian, shape: [2]}\n",
         ":10: argument 'weights': 'random' must be one of normal, uniform, simplex (got 'gaussian')"),
        ("id: attention_reading", "id: reading", ":1: 'id' must equal the file name 'attention_reading' (got 'reading')"),
        ("prompt: Read the values.\n", "prompt: Read the values.\nprompt: again\n", ":5: duplicate key 'prompt'"),
        ("    expect: [0.8, 0.2, 8, 4]\n", "    expect: [0.8, 0.2, 8, 4]\n    raises: ValueError\n",
         ":13: a case has either 'expect' or 'raises', not both"),
        ("args:\n", "args: [1, 2\n", ":10: invalid YAML: expected ',' or ']', but got ':'"),
    ])
    def test_bad_file_gives_exact_message(self, tmp_path, old, new, message):
        """Each kind of mistake is one line: path:line: what is wrong (got X)."""
        assert old in GOOD
        path = write(tmp_path, GOOD.replace(old, new, 1))
        assert errors_of(path) == [f"{path}{message}"]

    def test_missing_required_key(self, tmp_path):
        """A missing required key is reported on line 1 by name."""
        path = write(tmp_path, GOOD.replace("title: Reading\n", ""))
        assert errors_of(path) == [f"{path}:1: missing required key 'title'"]

    def test_missing_argument(self, tmp_path):
        """A case that leaves out a required parameter names it and the signature."""
        path = write(tmp_path, GOOD.replace("      weights: [0.8, 0.2]\n", ""))
        assert errors_of(path) == [
            f"{path}:9: case 'worked example' is missing argument 'weights' of attention_reading(weights, values) -> ndarray"]

    def test_several_errors_reported_together(self, tmp_path):
        """Independent errors in one file are all listed, in file order."""
        path = write(tmp_path, GOOD.replace("points: 10", "points: 0").replace("visibility: public", "visibility: 3"))
        assert errors_of(path) == [f"{path}:3: 'points' must be greater than 0 (got 0)",
                                   f"{path}:8: 'visibility' must be public or hidden (got 3)"]


class TestLoadAssignment:
    def make(self, tmp_path: Path, listing: str) -> Path:
        (tmp_path / "problems").mkdir()
        write(tmp_path / "problems", GOOD)
        (tmp_path / "assignment.yaml").write_text(listing + "code: course.py\n")
        copy_course_code(tmp_path)
        return tmp_path

    def test_duplicate_problem_id(self, tmp_path):
        """Listing a problem twice is an error on the second listing's line."""
        root = self.make(tmp_path, "title: T\nproblems:\n  - attention_reading\n  - attention_reading\n")
        with pytest.raises(SpecErrors) as info:
            load_course(root)
        assert str(info.value) == (f"{root / 'assignment.yaml'}:4: duplicate problem id 'attention_reading' "
                                   "(first listed on line 3)")

    def test_unknown_problem(self, tmp_path):
        """A listed id without a file is reported with its line."""
        root = self.make(tmp_path, "title: T\nproblems:\n  - attention_reading\n  - softmax\n")
        with pytest.raises(SpecErrors) as info:
            load_course(root)
        assert str(info.value) == f"{root / 'assignment.yaml'}:4: problem 'softmax' has no file problems/softmax.yaml"

    def test_points_override(self, tmp_path):
        """An {id, points} entry overrides the problem's own points."""
        root = self.make(tmp_path, "problems:\n  - {id: attention_reading, points: 3}\n")
        assert load_course(root).problems[0].points == 3.0

    def test_repository_course_loads(self, course):
        """The shipped assignment is valid and every problem has public and hidden cases."""
        assert course.problems
        for problem in course.problems:
            assert any(not c.hidden for c in problem.cases), problem.id
            assert any(c.hidden for c in problem.cases), problem.id


class TestSchema:
    def test_shipped_problems_match_the_json_schema(self):
        """The published JSON Schema accepts every shipped problem file."""
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((Path(__file__).parent.parent / "grader" / "course" / "problem.schema.json").read_text())
        files = sorted((EXERCISES / "problems").glob("*.yaml"))
        assert files
        for file in files:
            jsonschema.validate(json.loads(json.dumps(load_yaml(file))), schema)

    def test_schema_rejects_unknown_key(self):
        """The schema, like the loader, rejects keys it does not know."""
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((Path(__file__).parent.parent / "grader" / "course" / "problem.schema.json").read_text())
        doc = {"id": "x", "title": "t", "points": 1, "prompt": "p", "colour": "red",
               "cases": [{"name": "a", "visibility": "public", "args": {}}]}
        with pytest.raises(jsonschema.ValidationError, match="colour"):
            jsonschema.validate(doc, schema)

    def test_schema_takes_bug_or_its_older_name_variant_never_both(self):
        """A mistake names its function with `bug:` or `variant:` (still accepted), as the loader does; both is refused."""
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((Path(__file__).parent.parent / "grader" / "course" / "problem.schema.json").read_text())

        def doc(**names):
            return {"id": "x", "title": "t", "points": 1, "prompt": "p",
                    "cases": [{"name": "a", "visibility": "public", "args": {}}],
                    "mistakes": [{"id": "m", "message": "why", **names}]}
        jsonschema.validate(doc(bug="f"), schema)
        jsonschema.validate(doc(variant="f"), schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc(bug="f", variant="f"), schema)

    def test_shipped_quiz_matches_the_quiz_schema(self):
        """quiz.schema.json accepts the shipped quiz, pinned item (`shuffle: false`) included."""
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((Path(__file__).parent.parent / "grader" / "course" / "quiz.schema.json").read_text())
        quiz = json.loads(json.dumps(load_yaml(EXERCISES / "quiz.yaml")))
        assert any(item.get("shuffle") is False for item in quiz["items"])
        jsonschema.validate(quiz, schema)

    @pytest.mark.parametrize("change,words", [({"colour": "red"}, "colour"), ({"shuffle": "no"}, "'no'"),
                                              ({"kind": "numeric", "answer": 1, "feedback": "f", "choices": None},
                                               "should not be valid")])
    def test_quiz_schema_refuses_what_the_loader_refuses(self, change, words):
        """An unknown key, a `shuffle` that is not true or false, and `shuffle` on a numeric item are refused."""
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((Path(__file__).parent.parent / "grader" / "course" / "quiz.schema.json").read_text())
        item = {"id": "pick", "title": "t", "kind": "multiple_choice", "points": 1, "visibility": "public",
                "prompt": "p", "shuffle": False, "choices": [{"text": "a", "correct": True, "feedback": "f"},
                                                             {"text": "b", "feedback": "f", "mistake": "m"}]}
        jsonschema.validate({"items": [item]}, schema)
        item = {k: v for k, v in {**item, **change}.items() if v is not None}
        with pytest.raises(jsonschema.ValidationError, match=words):
            jsonschema.validate({"items": [item]}, schema)
