"""Every named mistake takes every argument of the function it imitates, so a case is never left
unexplained only because a bug cannot be called on it (a parameter the bug lacks)."""
from __future__ import annotations

import ast
import inspect

import pytest

from grader.course.code import course_function

from .conftest import EXERCISES


def _stub_parameters() -> dict[str, list[str]]:
    """The parameters of each stub in the course's exercises/attention.py, by function name."""
    tree = ast.parse((EXERCISES / "attention.py").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            found[node.name] = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return found


def _bugs(course):
    return [(p, m) for p in course.problems for m in p.mistakes if not m.detector]


def test_the_course_has_bugs_to_check(course):
    """The check below runs over real mistakes (dozens of them), not an empty list."""
    assert len(_bugs(course)) >= 40


@pytest.mark.parametrize("problem_id", [
    "count_routing_distributions", "multi_head_attention", "scaled_dot_product_attention", "softmax",
    "predict_shapes", "split_heads"])
def test_every_bug_takes_every_argument_of_its_stub(course, problem_id):
    """Each bug of the problem accepts each of the stub's parameters by name (or through **kwargs)."""
    stubs = _stub_parameters()
    problem = course.problem(problem_id)
    wanted = stubs[problem.function.name]
    missing = {}
    for mistake in problem.mistakes:
        if mistake.detector:
            continue
        fn = course_function(problem.code, mistake.bug)
        assert fn is not None, f"{mistake.bug} is not a function of the course code"
        parameters = inspect.signature(fn).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            continue
        lacking = [name for name in wanted if name not in parameters]
        if lacking:
            missing[mistake.id] = lacking
    assert missing == {}, f"{problem_id}: bugs that cannot take the stub's arguments: {missing}"


def test_every_problem_s_bugs_take_the_stub_s_arguments(course):
    """The same over every problem of the course whose function has a stub."""
    stubs = _stub_parameters()
    missing = {}
    for problem, mistake in _bugs(course):
        if problem.function.name not in stubs:
            continue
        fn = course_function(problem.code, mistake.bug)
        parameters = inspect.signature(fn).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            continue
        lacking = [name for name in stubs[problem.function.name] if name not in parameters]
        if lacking:
            missing[f"{problem.id}/{mistake.id}"] = lacking
    assert missing == {}


def test_a_count_mistake_is_named_on_the_grouped_query_cases(cli, tmp_path):
    """The count without the batch factor, written as a student would: named on the multi-query and
    grouped-query cases too, with no "second cause" left to look for."""
    path = tmp_path / "attention.py"
    path.write_text(
        "def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None,\n"
        "                                num_layers=1, batch=1, causal=False, num_kv_heads=None):\n"
        "    # one softmax row per query, per head, per layer\n"
        "    return num_layers * num_heads * num_queries\n")
    result = cli("grade", str(path), "--format", "json", "--problem", "count_routing_distributions")
    import json
    problem = json.loads(result.stdout)["problems"][0]
    failing = [c for c in problem["cases"] if c["status"] != "passed"]
    assert {c.get("mistake") for c in failing} == {"ignores-batch"}, failing
    assert any("multi-query" in c["name"] for c in failing)  # a case with num_kv_heads, named too
    assert "second cause" not in json.dumps(problem)


def test_a_mask_tested_with_if_is_named(cli_everything, tmp_path):
    """`if mask:` on an array raises numpy's "truth value ... is ambiguous": named on the masked cases,
    the unmasked ones pass."""
    import json
    path = tmp_path / "attention.py"
    path.write_text(
        "import numpy as np\n\n"
        "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
        "    scores = Q @ K.T / np.sqrt(K.shape[-1])\n"
        "    if mask:\n"
        "        scores = np.where(mask, scores, -1e9)\n"
        "    w = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
        "    w = w / w.sum(axis=-1, keepdims=True)\n"
        "    return w @ V, w\n")
    result = cli_everything("grade", str(path), "--format", "json", "--problem", "scaled_dot_product_attention")
    problem = json.loads(result.stdout)["problems"][0]
    failing = [c for c in problem["cases"] if c["status"] != "passed"]
    passing = [c for c in problem["cases"] if c["status"] == "passed"]
    assert failing and passing
    assert {c.get("mistake") for c in failing} == {"mask-tested-with-if"}, failing
    text = cli_everything("grade", str(path), "--problem", "scaled_dot_product_attention")
    assert "if mask is not None" in text.stdout


VIT_LAYER = '''
import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads):
    # a ViT-style layer: no mask parameter, every head scaled by the model width
    n, d_model = X.shape
    d_k = d_model // num_heads
    q = (X @ W_Q).reshape(n, num_heads, d_k).transpose(1, 0, 2)
    k = (X @ W_K).reshape(n, num_heads, d_k).transpose(1, 0, 2)
    v = (X @ W_V).reshape(n, num_heads, d_k).transpose(1, 0, 2)
    att = q @ k.transpose(0, 2, 1) / np.sqrt(d_model)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    out = (att @ v).transpose(1, 0, 2).reshape(n, d_model)
    return out @ W_O, att
'''


def test_a_layer_without_mask_support_is_named_where_it_can_be(cli, tmp_path):
    """A real-code-style layer with a catalogued bug and no mask parameter: the mistake is named on
    the unmasked cases, and the masked ones are said to fail for another reason (no mask taken)."""
    import json
    path = tmp_path / "attention.py"
    path.write_text(VIT_LAYER)
    result = cli("grade", str(path), "--format", "json", "--problem", "multi_head_attention")
    cases = json.loads(result.stdout)["problems"][0]["cases"]
    masked = [c for c in cases if "mask" in c["name"]]
    unmasked_failing = [c for c in cases if "mask" not in c["name"] and c["status"] != "passed"]
    assert masked and unmasked_failing
    assert {c.get("mistake") for c in unmasked_failing} == {"mha-scaled-by-d-model"}
    assert all(c.get("mistake") is None and c["status"] == "error" for c in masked)
    text = cli("grade", str(path), "--problem", "multi_head_attention").stdout
    assert "they fail for another reason: your code takes no mask" in " ".join(text.split())
    assert "second cause" not in text
